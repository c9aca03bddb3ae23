"""Test worker: starts a grandchild (`sleep 1000`, in the worker's process group, as a data
loader process is), writes DIR/pids_rank<RANK> ("<worker> <grandchild>"),
then sleeps forever.

Usage: spawn_grandchild.py DIR
"""
import os
import subprocess
import sys
import time

out_dir = sys.argv[1]
rank = os.environ.get("RANK", "x")
child = subprocess.Popen(["sleep", "1000"])
with open(os.path.join(out_dir, f"pids_rank{rank}.tmp"), "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(os.path.join(out_dir, f"pids_rank{rank}.tmp"), os.path.join(out_dir, f"pids_rank{rank}"))
while True:
    time.sleep(60)
