"""PyTorch reads ddp-train's checkpoint: the weights load into an nn.Sequential of Linear and ReLU
layers with load_state_dict(strict=True), and that model's accuracy on the Fashion-MNIST test set
equals the test_accuracy the trainer printed."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ddptest  # noqa: E402
import train_common as tc  # noqa: E402

TORCH_SCRIPT = r"""
import gzip, json, struct, sys
import torch

path, data_dir = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    blob = f.read()
n = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + n])
meta = header.pop("__metadata__")
state = {}
for name, e in header.items():
    if name.startswith("optimizer."):
        continue
    b, end = e["data_offsets"]
    state[name] = torch.frombuffer(bytearray(blob[8 + n + b:8 + n + end]),
                                   dtype=torch.float32).reshape(e["shape"])
widths = [int(w) for w in meta["widths"].split("-")]
layers = []
for i in range(len(widths) - 1):
    layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
    if i + 2 < len(widths):
        layers.append(torch.nn.ReLU())
model = torch.nn.Sequential(*layers)
model.load_state_dict(state, strict=True)

def idx(name):
    with gzip.open(f"{data_dir}/{name}", "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = struct.unpack(f">{dims}I", raw[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)

x = (idx("t10k-images-idx3-ubyte.gz").reshape(-1, 784).float() / 255.0 - 0.2860) / 0.3530
y = idx("t10k-labels-idx1-ubyte.gz").long()
with torch.no_grad():
    accuracy = (model(x).argmax(1) == y).float().mean().item()
print(f"torch_accuracy={accuracy:.4f}")
"""


def main():
    tc.require_data()
    ddptest.require_torch()
    tmp = ddptest.temp_dir()
    try:
        ckpt = os.path.join(tmp, "model.safetensors")
        result = tc.ddprun_train(2, ["--hidden", "128,64", "--max_steps", "60", "--checkpoint", ckpt])
        ours = float(tc.summary_fields(result.stdout)["test_accuracy"])
        torch_run = subprocess.run([ddptest.TORCH_PYTHON, "-c", TORCH_SCRIPT, ckpt, tc.DATA_DIR],
                                   capture_output=True, text=True, timeout=60)
        ddptest.check(torch_run.returncode == 0, f"torch could not load {ckpt}:\n{torch_run.stderr}")
        theirs = float(torch_run.stdout.strip().split("=")[1])
        print(f"ddp-train test_accuracy={ours:.4f}, the same weights in torch: {theirs:.4f}")
        ddptest.check(ours > 0.5, f"accuracy {ours} after 60 steps: the model did not train")
        ddptest.check(abs(ours - theirs) <= 2e-4,
                      f"torch's accuracy {theirs} differs from ddp-train's {ours}")
    finally:
        ddptest.remove_tree(tmp)
    print("OK")


if __name__ == "__main__":
    main()
