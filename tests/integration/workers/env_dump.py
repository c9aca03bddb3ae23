"""Test worker: writes its environment and argv as JSON to <dir>/env_rank<RANK>_attempt<N>.json.

Usage: env_dump.py DIR [args...]. Exits 0 (or DDP_TEST_EXIT_CODE when set).
"""
import json
import os
import sys

out_dir = sys.argv[1]
rank = os.environ.get("RANK", "x")
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "x")
record = {"argv": sys.argv, "env": dict(os.environ), "pid": os.getpid(), "cwd": os.getcwd()}
path = os.path.join(out_dir, f"env_rank{rank}_attempt{attempt}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.replace(path + ".tmp", path)
print(f"env_dump rank={rank} attempt={attempt}", flush=True)
sys.exit(int(os.environ.get("DDP_TEST_EXIT_CODE", "0")))
