"""Test and benchmark worker for elastic faults: a real PyTorch DDP job on CPU (gloo) that trains
in epochs of STEPS steps with a SLEEP after each, checkpoints after every epoch (rank 0, into
DIR/checkpoint.pt) and resumes from the checkpoint when it starts. It trains until DIR/stop
exists (checked at each epoch's start, agreed on by an all_reduce) or MAX_EPOCHS.

Files it writes (times are time.time()):
  DIR/start_w<W>_r<R>_c<RESTART_COUNT>_p<PID>.json  after init_process_group: init_time,
      resumed_epoch, node (GROUP_RANK)
  DIR/barrier_w<W>_e<E>                             rank 0, after epoch E's opening all_reduce
  DIR/result_r<R>.json                              at the end: world, epochs, params
--fail R:E:C makes rank R exit 3 at the start of epoch E when TORCHELASTIC_RESTART_COUNT is C.

Usage: torch_elastic_worker.py DIR [--steps 8] [--sleep 0.2] [--max_epochs 200] [--fail R:E:C]
"""
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def write_json(path, doc):
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)


out_dir = sys.argv[1]
steps, pause = int(arg("--steps", "8")), float(arg("--sleep", "0.2"))
max_epochs = int(arg("--max_epochs", "200"))
fail = [int(v) for v in arg("--fail", "-1:-1:-1").split(":")]
restart_count = int(os.environ["TORCHELASTIC_RESTART_COUNT"])

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=120))
init_time = time.time()
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
checkpoint = os.path.join(out_dir, "checkpoint.pt")
epoch = 0
if os.path.exists(checkpoint):
    saved = torch.load(checkpoint)
    model.load_state_dict(saved["model"])
    epoch = saved["epoch"]
write_json(os.path.join(out_dir, f"start_w{world}_r{rank}_c{restart_count}_p{os.getpid()}.json"),
           {"init_time": init_time, "resumed_epoch": epoch, "rank": rank, "world": world,
            "restart_count": restart_count, "node": int(os.environ["GROUP_RANK"])})
print(f"torch_elastic_worker rank={rank} world={world} resumed_epoch={epoch}", flush=True)

ddp = DistributedDataParallel(model)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
generator = torch.Generator().manual_seed(rank)
while epoch < max_epochs:
    stop = torch.tensor([1.0 if rank == 0 and os.path.exists(os.path.join(out_dir, "stop")) else 0.0])
    dist.all_reduce(stop)
    if stop.item() > 0:
        break
    if rank == 0:
        with open(os.path.join(out_dir, f"barrier_w{world}_e{epoch}"), "w") as f:
            f.write(f"{time.time():.6f}\n")
    if [rank, epoch, restart_count] == fail:
        print(f"torch_elastic_worker rank={rank} fails on purpose at epoch {epoch}", flush=True)
        os._exit(3)
    for _ in range(steps):
        x = torch.randn(16, 8, generator=generator)
        loss = ((ddp(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(pause)
    epoch += 1
    if rank == 0:
        torch.save({"epoch": epoch, "model": model.state_dict()}, checkpoint + ".tmp")
        os.replace(checkpoint + ".tmp", checkpoint)

flat = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
assert all(torch.equal(g, flat) for g in gathered), "parameters diverged across ranks"
write_json(os.path.join(out_dir, f"result_r{rank}.json"),
           {"world": world, "epochs": epoch, "params": flat.tolist()})
dist.destroy_process_group()
