"""A PyTorch 1.13 worker of the outsider test: joins a gloo group through the workers' store,
sets a probe key there (rank 0), tells the test where the workers' store is, waits until the
test's attacks are over (the go file), then checks that the group and the probe are untouched.
Writes result_rank<RANK>.json into the output folder given as its argument."""

import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

out_dir = sys.argv[1]
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, False,
                      datetime.timedelta(seconds=60))
if rank == 0:
    store.set("/probe", "job")
dist.barrier()
with open(os.path.join(out_dir, f"store_rank{rank}.json.tmp"), "w") as f:
    json.dump({"master_addr": os.environ["MASTER_ADDR"],
               "master_port": int(os.environ["MASTER_PORT"])}, f)
os.rename(os.path.join(out_dir, f"store_rank{rank}.json.tmp"),
          os.path.join(out_dir, f"store_rank{rank}.json"))
go = os.path.join(out_dir, "go")
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
total = torch.ones(1) * (rank + 1)
dist.all_reduce(total)
result = {"rank": rank, "world_size": world, "group_rank": int(os.environ["GROUP_RANK"]),
          "sum": float(total.item()), "probe": store.get("/probe").decode()}
dist.barrier()
with open(os.path.join(out_dir, f"result_rank{rank}.json"), "w") as f:
    json.dump(result, f)
dist.destroy_process_group()
