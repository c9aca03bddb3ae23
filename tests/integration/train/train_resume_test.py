"""Elastic resume under a real ddprun: rank 1 exits 3 at step 7 (--fail_at_step, once, its marker
beside the checkpoint); ddprun --max_restarts=1 restarts both ranks, which resume from the step-4
checkpoint and finish with a checkpoint byte-for-byte equal to an uninterrupted run's. Without a
restart left, ddprun exits with the worker's code 3.

A checkpoint resumed at another world size goes on where its epoch stood: 500 steps of one rank
(micro-batch 500 of 938 in the epoch) resumed by 2 ranks (469 micro-batches an epoch) continue at
micro-batch 250 of epoch 0, and train the 10 steps asked for (the position was read at the new
world size, past the epoch's end, and the run ended without a step)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ddptest  # noqa: E402
import train_common as tc  # noqa: E402

ARGS = [*tc.SMALL, "--max_steps", "10", "--checkpoint_every", "4", "--batch_size", "32",
        "--optimizer", "adamw", "--seed", "9"]


def main():
    tc.require_data()
    tmp = ddptest.temp_dir()
    try:
        straight = os.path.join(tmp, "straight.safetensors")
        tc.ddprun_train(2, [*ARGS, "--checkpoint", straight])

        resumed = os.path.join(tmp, "resumed.safetensors")
        with open("/proc/sys/kernel/pid_max") as f:  # a writer killed mid-save left this behind
            stale = f"{resumed}.tmp.{int(f.read()) + 1}"
        with open(stale, "w") as f:
            f.write("partial")
        result = tc.ddprun_train(2, [*ARGS, "--checkpoint", resumed, "--fail_at_step", "7",
                                     "--fail_rank", "1"], ddprun_args=["--max_restarts=1"])
        output = result.stdout + result.stderr
        ddptest.check("injected failure at step=7 rank=1" in output,
                      f"the fault was not injected:\n{output}")
        ddptest.check("resumed from" in output and "step=4" in output,
                      f"the restarted workers did not resume from step 4:\n{output}")
        ddptest.check(os.path.exists(resumed + ".failed_once"), "no marker beside the checkpoint")
        ddptest.check(not os.path.exists(stale), f"stale temporary {stale} left in place")
        with open(straight, "rb") as a, open(resumed, "rb") as b:
            ddptest.check(a.read() == b.read(),
                          "the resumed run's checkpoint differs from the uninterrupted run's")
        print("resumed run ends bitwise equal to the uninterrupted run")

        once_more = os.path.join(tmp, "no_restart.safetensors")
        result = tc.ddprun_train(2, [*ARGS, "--checkpoint", once_more, "--fail_at_step", "3",
                                     "--fail_rank", "0"], check_rc=3)
        print("without restarts ddprun exits 3, the failed worker's code")

        grown = os.path.join(tmp, "grown.safetensors")
        world1 = [*tc.SMALL, "--batch_size", "64", "--checkpoint", grown, "--seed", "9"]
        tc.ddprun_train(1, [*world1, "--max_steps", "500"], timeout=180)
        result = tc.ddprun_train(2, [*world1, "--max_steps", "510", "--log_every", "5"])
        summary = tc.summary_fields(result.stdout)
        ddptest.check(summary["steps"] == "510" and summary["epochs"] == "0",
                      f"the world-2 resume of a world-1 checkpoint did not train on in epoch 0:"
                      f"\n{result.stdout}\n{result.stderr}")
        print("a world-1 checkpoint resumed at world 2 trains on in its epoch")
    finally:
        ddptest.remove_tree(tmp)
    print("OK")


if __name__ == "__main__":
    main()
