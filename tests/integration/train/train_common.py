"""Helpers for ddp-train's integration tests: run the trainer under ddprun, read safetensors.

The safetensors reader is stdlib only (struct + json), so tests without PyTorch can compare
checkpoints tensor by tensor.
"""

import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ddptest  # noqa: E402

DATA_DIR = "/usr/share/datasets/fashion-mnist"
# Small and quick: the tests check semantics, not accuracy (train_accuracy_test does that).
SMALL = ["--hidden", "64"]


def require_data():
    ddptest.require(os.path.exists(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz")),
                    f"no Fashion-MNIST in {DATA_DIR} (apt-get install dataset-fashion-mnist)")


def visible_gpus():
    """GPUs this build of libddp can use (0 on a machine without one, or a build without CUDA)."""
    probe = ddptest.run([ddptest.bin_path("runtime_worker"), "cuda-devices"], timeout=60)
    return int(probe.stdout.strip().rsplit("=", 1)[1]) if "=" in probe.stdout else 0


def read_safetensors(path):
    """Returns (tensors, metadata): tensors maps name -> (shape, list of floats)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, entry in header.items():
        ddptest.check(entry["dtype"] == "F32", f"{path}: {name} has dtype {entry['dtype']}")
        begin, end = entry["data_offsets"]
        count = (end - begin) // 4
        tensors[name] = (entry["shape"], struct.unpack(f"<{count}f", data[begin:end]))
    return tensors, metadata


def relative_difference(a, b):
    """||a - b|| / ||b|| over every tensor of two read_safetensors() results."""
    ddptest.check(sorted(a) == sorted(b), f"tensor names differ: {sorted(a)} vs {sorted(b)}")
    diff = norm = 0.0
    for name in a:
        ddptest.check(a[name][0] == b[name][0], f"{name}: shape {a[name][0]} vs {b[name][0]}")
        for x, y in zip(a[name][1], b[name][1]):
            diff += (x - y) ** 2
            norm += y * y
    return math.sqrt(diff) / math.sqrt(norm)


def ddprun_train(nproc, train_args, ddprun_args=(), timeout=90, check_rc=0, env=None):
    """Runs `ddprun --nproc_per_node=N --no_python [ddprun_args] ddp-train train_args`; returns the result."""
    cmd = [ddptest.bin_path("ddprun"), f"--nproc_per_node={nproc}", "--no_python", *ddprun_args,
           ddptest.bin_path("ddp-train"), *train_args]
    full_env = {"OMP_NUM_THREADS": "1"}
    full_env.update(env or {})
    return ddptest.run(cmd, timeout=timeout, env=full_env, check_rc=check_rc)


def summary_fields(stdout):
    """The key=value fields of the trainer's last 'summary' line."""
    lines = [line for line in stdout.splitlines() if "summary " in line]
    ddptest.check(lines, f"no summary line in:\n{stdout}")
    fields = {}
    for token in lines[-1].split():
        if "=" in token:
            key, value = token.split("=", 1)
            fields[key] = value
    return fields
