"""Worker for big_set_nodes_test.py: rank 0 does one 256 MiB TCPStore.set on the worker store (its
agent's loop, which also serves the c10d heartbeats); then every rank meets the others through the
store, holds 3 s while the agents keep heartbeating, and exits 0."""
import datetime
import os
import time

from torch.distributed import TCPStore

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, False,
                 datetime.timedelta(seconds=120))
if rank == 0:
    start = time.monotonic()
    store.set("big", b"x" * (256 << 20))
    print(f"rank 0 set 256 MiB in {time.monotonic() - start:.2f} s", flush=True)
store.add("arrived", 1)
while int(store.add("arrived", 0)) < world:
    time.sleep(0.05)
time.sleep(3)
print(f"rank {rank} done", flush=True)
