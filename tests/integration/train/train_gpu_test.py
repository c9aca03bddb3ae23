"""ddp-train on CUDA (label gpu; skipped where no GPU is visible, even under DDP_REQUIRE_ALL, since
CI has none). Under a real ddprun with one worker on GPU 0 (NCCL, world size 1):
- SGD and AdamW runs end within 1e-3 (relative) of the same runs on the CPU, step for step the
  same data: the CUDA engine computes what the CPU engine computes, up to rounding;
- an elastic resume on the GPU ends with the checkpoint of an uninterrupted GPU run;
- one epoch of the default model reaches 80% test accuracy, and the summary names cuda:0.
With two or more GPUs, 2 ranks x batch b equal 1 rank x batch 2b (the NCCL reducer averages)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ddptest  # noqa: E402
import train_common as tc  # noqa: E402

STEPS = ["--max_steps", "60", "--batch_size", "64", "--hidden", "256,128", "--seed", "5"]


def train(nproc, device, args, **kwargs):
    backend = "nccl" if device == "cuda" else "gloo"
    result = tc.ddprun_train(nproc, [*args, "--device", device, "--backend", backend], **kwargs)
    return result, tc.summary_fields(result.stdout) if kwargs.get("check_rc", 0) == 0 else None


def compare(a, b, what, bound):
    diff = tc.relative_difference(tc.read_safetensors(a)[0], tc.read_safetensors(b)[0])
    ddptest.check(diff <= bound, f"{what}: relative difference {diff:.3g} > {bound}")
    print(f"{what}: relative difference {diff:.3g}")


def main():
    tc.require_data()
    gpus = tc.visible_gpus()
    if gpus == 0:
        print("SKIP: no GPU visible (or a build without CUDA)")
        sys.exit(ddptest.SKIP)
    tmp = ddptest.temp_dir()
    try:
        for optimizer in ("sgd", "adamw"):
            ckpt = {}
            for device in ("cpu", "cuda"):
                ckpt[device] = os.path.join(tmp, f"{optimizer}_{device}.safetensors")
                _, fields = train(1, device, [*STEPS, "--optimizer", optimizer,
                                              "--checkpoint", ckpt[device]])
                ddptest.check(fields["device"] == ("cpu" if device == "cpu" else "cuda:0"),
                              f"summary device={fields['device']} for --device {device}")
            compare(ckpt["cuda"], ckpt["cpu"], f"{optimizer}: cuda vs cpu after 60 steps", 1e-3)

        straight = os.path.join(tmp, "straight.safetensors")
        resumed = os.path.join(tmp, "resumed.safetensors")
        resume_args = [*STEPS, "--checkpoint_every", "20", "--optimizer", "adamw"]
        train(1, "cuda", [*resume_args, "--checkpoint", straight])
        result, _ = train(1, "cuda", [*resume_args, "--checkpoint", resumed, "--fail_at_step",
                                      "30"], ddprun_args=["--max_restarts=1"])
        ddptest.check("resumed from" in result.stdout + result.stderr,
                      f"no resume:\n{result.stdout}{result.stderr}")
        compare(resumed, straight, "cuda: resumed vs uninterrupted", 1e-6)

        if gpus >= 2:
            two = os.path.join(tmp, "two.safetensors")
            one = os.path.join(tmp, "one.safetensors")
            args = ["--max_steps", "20", "--hidden", "256", "--seed", "3"]
            train(2, "cuda", [*args, "--batch_size", "32", "--checkpoint", two])
            train(1, "cuda", [*args, "--batch_size", "64", "--checkpoint", one])
            compare(two, one, "cuda: 2 ranks x 32 vs 1 rank x 64", 1e-5)

        _, fields = train(1, "cuda", ["--epochs", "1"], timeout=300)
        accuracy = float(fields["test_accuracy"])
        ddptest.check(accuracy >= 0.80, f"one epoch on cuda: test_accuracy {accuracy} < 0.80")
        print(f"one epoch on cuda:0: test_accuracy={accuracy} "
              f"samples_per_s={fields['samples_per_s']}")
    finally:
        ddptest.remove_tree(tmp)
    print("OK")


if __name__ == "__main__":
    main()
