"""DDP semantics under a real ddprun: after K steps, 2 ranks x batch b hold the same parameters as
1 rank x batch 2b, and --grad_accum 2 at batch b equals batch 2b (relative difference <= 1e-5)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ddptest  # noqa: E402
import train_common as tc  # noqa: E402

STEPS = "6"


def train(tmp, name, nproc, batch, extra=()):
    path = os.path.join(tmp, f"{name}.safetensors")
    tc.ddprun_train(nproc, [*tc.SMALL, "--max_steps", STEPS, "--batch_size", str(batch),
                            "--checkpoint", path, "--seed", "5", *extra])
    tensors, meta = tc.read_safetensors(path)
    ddptest.check(meta["step"] == STEPS, f"{name}: checkpoint at step {meta['step']}")
    return {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}, tensors


def main():
    tc.require_data()
    tmp = ddptest.temp_dir()
    try:
        one, _ = train(tmp, "one_rank_b32", 1, 32)
        two, _ = train(tmp, "two_ranks_b16", 2, 16)
        # 0.02 MiB buckets: every gradient in a bucket of its own or nearly, four all-reduces.
        buckets, _ = train(tmp, "two_ranks_small_buckets", 2, 16, ["--bucket_cap_mb", "0.02"])
        accum, _ = train(tmp, "accum2_b16", 1, 16, ["--grad_accum", "2"])
        adam_one, _ = train(tmp, "adamw_one", 1, 32, ["--optimizer", "adamw"])
        adam_two, _ = train(tmp, "adamw_two", 2, 16, ["--optimizer", "adamw"])
        init_path = os.path.join(tmp, "init.safetensors")
        tc.ddprun_train(1, [*tc.SMALL, "--epochs", "0", "--seed", "5", "--checkpoint", init_path])
        init = {k: v for k, v in tc.read_safetensors(init_path)[0].items()
                if not k.startswith("optimizer.")}
        for label, a, b in (("2 ranks x 16 vs 1 x 32", two, one),
                            ("2 ranks, small buckets vs 1 x 32", buckets, one),
                            ("grad_accum 2 x 16 vs 32", accum, one),
                            ("adamw: 2 ranks x 16 vs 1 x 32", adam_two, adam_one)):
            rel = tc.relative_difference(a, b)
            print(f"{label}: relative difference {rel:.3g}")
            ddptest.check(rel <= 1e-5, f"{label}: relative difference {rel} > 1e-5")
        # Training moved the weights: the equalities are not those of untouched parameters.
        for label, trained in (("sgd", one), ("adamw", adam_one)):
            moved = tc.relative_difference(trained, init)
            print(f"{label}: moved {moved:.3g} from the initial weights")
            ddptest.check(moved > 1e-3, f"{label}: parameters barely moved ({moved})")
    finally:
        ddptest.remove_tree(tmp)
    print("OK")


if __name__ == "__main__":
    main()
