"""The worker of scripts/gpu/inprocess_cuda.py: a CUDA model (CPU with --cpu) trained through
ddprun.elastic with the gloo backend (one GPU cannot hold two NCCL ranks). After every commit it
appends one JSON record: time, pid, world, step, torch.cuda.memory_allocated() and the first
parameter's data_ptr (the same pointer after a re-form: the model stayed on the GPU).
Usage: inprocess_worker_cuda.py OUT_DIR NODE [--cpu]"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

import ddprun.elastic as elastic

out, node = sys.argv[1], sys.argv[2]
device = "cpu" if "--cpu" in sys.argv else "cuda"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
state = elastic.TorchState(model=model, optimizer=optimizer, step=0)
records = open(os.path.join(out, f"records_n{node}_p{os.getpid()}.jsonl"), "a")


@elastic.run(backend="gloo")
def train(state):
    world = dist.get_world_size()
    for step in range(state.step, 1000000):
        if os.path.exists(os.path.join(out, "stop")):
            return
        x = torch.randn(64, 256, device=device)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        state.step = step + 1
        state.commit()
        memory = torch.cuda.memory_allocated() if device == "cuda" else 0
        records.write(json.dumps({"time": time.time(), "pid": os.getpid(), "node": int(node),
                                  "world": world, "step": step + 1, "memory": memory,
                                  "ptr": next(model.parameters()).data_ptr()}) + "\n")
        records.flush()
        time.sleep(0.05)


train(state)
