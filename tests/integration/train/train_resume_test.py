"""Elastic resume under a real ddprun: rank 1 exits 3 at step 7 (--fail_at_step, once, its marker
beside the checkpoint); ddprun --max_restarts=1 restarts both ranks, which resume from the step-4
checkpoint and finish with a checkpoint byte-for-byte equal to an uninterrupted run's. Without a
restart left, ddprun exits with the worker's code 3."""

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
    finally:
        ddptest.remove_tree(tmp)
    print("OK")


if __name__ == "__main__":
    main()
