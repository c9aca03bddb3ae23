"""A two-rank PyTorch gloo job for stack reports: rank 1 sleeps inside
sleep_inside_named_function() until DIR/go exists, while rank 0 waits in all_reduce
(wait_in_all_reduce) for rank 1. Each rank writes DIR/ready_rank<R> before it blocks; then both
finish the all_reduce and exit 0. Needs /usr/bin/python3 with torch."""
import os
import sys
import time

import torch
import torch.distributed as dist

OUT = sys.argv[1]
RANK = int(os.environ["RANK"])


def mark(name):
    with open(os.path.join(OUT, f"{name}_rank{RANK}"), "w") as f:
        f.write(str(os.getpid()))


def sleep_inside_named_function():
    while not os.path.exists(os.path.join(OUT, "go")):
        time.sleep(0.05)


def wait_in_all_reduce(tensor):
    dist.all_reduce(tensor)


dist.init_process_group("gloo")
tensor = torch.ones(4)
dist.all_reduce(tensor)  # both ranks are up
mark("ready")
if RANK == 1:
    sleep_inside_named_function()
wait_in_all_reduce(tensor)
dist.destroy_process_group()
