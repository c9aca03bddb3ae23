"""c10d on loopback: a worker failure on one of two agents spends one job-wide restart; both
agents restart their workers (TORCHELASTIC_RESTART_COUNT 1 on every rank) and finish with 0."""

import glob
import json
import os
import sys

import ddptest
from ddptest import check

WORKER = os.path.join(ddptest.SOURCE_DIR, "tests/integration/workers/fail_once.py")

out_dir = ddptest.temp_dir()
port = ddptest.free_port()
procs = []
try:
    for node in range(2):
        cmd = [ddptest.bin_path("ddprun"), "--nnodes=2", "--nproc_per_node=1", "--max_restarts=1",
               "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=restart",
               "--log_level=info",  # the check reads the "reported failure" info line
               "--python", sys.executable, WORKER, out_dir, "--rank", "1", "--code", "3"]
        procs.append(ddptest.spawn(cmd, env={"DDP_TEST_HEALTHY_SECONDS": "1"},
                                   stdout=ddptest.subprocess.PIPE, stderr=ddptest.subprocess.PIPE,
                                   text=True))
    logs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        logs.append(err)
        check(p.returncode == 0, f"agent exited {p.returncode}\n{err}")
    records = [json.load(open(f))["env"] for f in glob.glob(os.path.join(out_dir, "env_rank*.json"))]
    attempts = sorted((r["RANK"], r["TORCHELASTIC_RESTART_COUNT"]) for r in records)
    check(attempts == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")],
          f"(rank, restart count) of every start: {attempts}")
    check(sum("reported failure round=0 restart_count=1" in log for log in logs) == 1,
          "exactly one agent must spend the restart")
    # (Its workers may still run, or have succeeded: the failing agent reports after waiting
    # briefly for a verdict on whether a node was lost.)
    check(any("round ended by another node" in log or "but another node failed" in log
              for log in logs), "the healthy agent did not learn of the failure")
    print("ok one job-wide restart; both agents restarted and finished")
except ddptest.subprocess.TimeoutExpired:
    ddptest.fail("agents did not finish in 60 s")
finally:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()
    ddptest.remove_tree(out_dir)
