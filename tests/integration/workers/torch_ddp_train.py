"""Test worker: a real PyTorch DDP job on CPU (gloo). Joins with init_process_group("env://"),
trains a small linear model for a few steps under DistributedDataParallel, checks that an
all_reduce sums the ranks, checks that every rank holds identical parameters, and rank 0 saves a
checkpoint. Writes DIR/result_rank<RANK>.json. Needs /usr/bin/python3 with torch.

Usage: torch_ddp_train.py DIR [--steps N]
"""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

out_dir = sys.argv[1]
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 5

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

total = torch.tensor([float(rank)])
dist.all_reduce(total)
assert total.item() == sum(range(world)), total

torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
generator = torch.Generator().manual_seed(rank)
for _ in range(steps):
    x = torch.randn(16, 8, generator=generator)
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

flat = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
assert all(torch.equal(g, flat) for g in gathered), "parameters diverged across ranks"
if rank == 0:
    torch.save(model.module.state_dict(), os.path.join(out_dir, "checkpoint.pt"))
dist.barrier()
with open(os.path.join(out_dir, f"result_rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world_size": world, "allreduce": total.item(),
               "loss": loss.item(), "params": flat.tolist()}, f)
dist.destroy_process_group()
