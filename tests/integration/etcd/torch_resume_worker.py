"""Test worker: a PyTorch 1.13 gloo DDP job that checkpoints every step and resumes from its
checkpoint. Rank 0 writes DIR/checkpoint.pt ({"step", "model"}) after each step; a worker that
finds one starts after its step. In world HOLD it paces its steps (0.3 s) so the test can kill a
node mid-run. At the end every rank writes DIR/result_world<W>_rank<R>.json (its first step, the
final step, its store, when it got past init_process_group). Needs /usr/bin/python3 with torch.

Usage: torch_resume_worker.py DIR STEPS HOLD
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

out_dir, steps, hold = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ckpt = os.path.join(out_dir, "checkpoint.pt")

dist.init_process_group("gloo", init_method="env://")
initialized = time.time()  # the test measures a node loss to the next group's init
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
start = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    start = state["step"]
ddp = DistributedDataParallel(model)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
for step in range(start, steps):
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(step * 100 + rank))
    loss = ((ddp(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if rank == 0:
        torch.save({"step": step + 1, "model": model.state_dict()}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
    if str(world) == hold:
        time.sleep(0.3)

flat = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
assert all(torch.equal(g, flat) for g in gathered), "parameters diverged across ranks"
with open(os.path.join(out_dir, f"result_world{world}_rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": world, "start": start, "steps": steps,
               "store": [os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]],
               "initialized": initialized}, f)
dist.destroy_process_group()
