"""Test worker: the rank named by --rank fails once (exit --code, after printing --lines lines to
stderr) and leaves a marker file in DIR; every other run of it dumps its environment like
env_dump.py and exits 0. With --always the rank fails on every attempt; --signal N makes it kill
itself with signal N instead of exiting.

Usage: fail_once.py DIR [--rank R] [--code N] [--lines K] [--always] [--signal N]
"""
import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("dir")
parser.add_argument("--rank", type=int, default=1)
parser.add_argument("--code", type=int, default=3)
parser.add_argument("--lines", type=int, default=25)
parser.add_argument("--always", action="store_true")
parser.add_argument("--signal", type=int, default=0)
parser.add_argument("--delay", type=float, default=0.0, help="seconds before failing")
args = parser.parse_args()

rank = int(os.environ["RANK"])
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
marker = os.path.join(args.dir, f"failed_rank{rank}")
record_path = os.path.join(args.dir, f"env_rank{rank}_attempt{attempt}.json")
with open(record_path + ".tmp", "w") as f:
    json.dump({"env": dict(os.environ), "pid": os.getpid(), "argv": sys.argv}, f)
os.replace(record_path + ".tmp", record_path)

if rank == args.rank and (args.always or not os.path.exists(marker)):
    open(marker, "w").close()
    # Fail only once every rank of this attempt has written its record (up to 10 s), so tests
    # see the whole attempt even on a loaded machine.
    world = int(os.environ["WORLD_SIZE"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and sum(
            os.path.exists(os.path.join(args.dir, f"env_rank{r}_attempt{attempt}.json"))
            for r in range(world)) < world:
        time.sleep(0.01)
    time.sleep(args.delay)
    for i in range(args.lines):
        print(f"stderr line {i} of rank {rank}", file=sys.stderr, flush=True)
    if args.signal:
        os.kill(os.getpid(), args.signal)
    sys.exit(args.code)
# Healthy ranks live a little, so a failing rank is seen first and they get stopped.
time.sleep(float(os.environ.get("DDP_TEST_HEALTHY_SECONDS", "0")))
sys.exit(0)
