"""ddp-train's errors: a missing data directory, a corrupt data file and a checkpoint of another
model shape each end the run with exit code 2 and one line naming the file (through ddprun, whose
exit code is the worker's); so do an unknown --optimizer or --device, and --device cuda where no
GPU is visible."""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ddptest  # noqa: E402
import train_common as tc  # noqa: E402


def expect_error(nproc, args, *needles):
    result = tc.ddprun_train(nproc, args, check_rc=2)
    for needle in needles:
        ddptest.check(needle in result.stderr,
                      f"'{needle}' not in stderr of {args}:\n{result.stderr}")
    print(f"exit 2 naming {needles[0]}")


def main():
    tc.require_data()
    tmp = ddptest.temp_dir()
    try:
        missing = os.path.join(tmp, "no_such_dir")
        expect_error(2, ["--data", missing], f"{missing}/train-images-idx3-ubyte.gz: cannot open")

        corrupt = os.path.join(tmp, "corrupt")
        os.mkdir(corrupt)
        for name in os.listdir(tc.DATA_DIR):
            shutil.copy(os.path.join(tc.DATA_DIR, name), corrupt)
        labels = os.path.join(corrupt, "t10k-labels-idx1-ubyte.gz")
        with open(labels, "r+b") as f:
            size = os.path.getsize(labels)
            f.truncate(size // 2)
        expect_error(1, ["--data", corrupt], f"{labels}: corrupt gzip data")

        ckpt = os.path.join(tmp, "small.safetensors")
        tc.ddprun_train(1, ["--hidden", "32", "--max_steps", "1", "--checkpoint", ckpt])
        expect_error(2, ["--hidden", "64", "--max_steps", "1", "--checkpoint", ckpt],
                     f"checkpoint {ckpt}: model widths are 784-32-10, this run's are 784-64-10")

        expect_error(1, ["--optimizer", "lion"], "--optimizer")
        expect_error(1, ["--device", "gpu"], "--device")
        if tc.visible_gpus() == 0:
            expect_error(1, ["--device", "cuda", "--max_steps", "1"], "--device cuda: ")
    finally:
        ddptest.remove_tree(tmp)
    print("OK")


if __name__ == "__main__":
    main()
