"""Test worker for elastic runs: writes DIR/env_rank<R>_world<W>_attempt<N>.json with its
environment, then sleeps while WORLD_SIZE is HOLD, or one of HOLD's comma-separated worlds (the
worlds the test is about to change), and exits 0 in any other world.

Usage: hold_worker.py DIR HOLD[,HOLD...]
"""
import json
import os
import sys
import time

out_dir, hold = sys.argv[1], sys.argv[2]
env = dict(os.environ)
name = f"env_rank{env['RANK']}_world{env['WORLD_SIZE']}_attempt{env['TORCHELASTIC_RESTART_COUNT']}"
path = os.path.join(out_dir, name + ".json")
with open(path + ".tmp", "w") as f:
    json.dump({"env": env, "pid": os.getpid()}, f)
os.replace(path + ".tmp", path)
print(f"hold_worker rank={env['RANK']} world={env['WORLD_SIZE']}", flush=True)
if env["WORLD_SIZE"] in hold.split(","):
    time.sleep(120)
