"""A standalone `ddp-store serve` as the c10d endpoint (every agent a client): SIGKILL of one of
three agents (--nnodes=2:3, default heartbeats: a 15 s window) is known by its closed store
connection. The store expires the agent's lease, the survivors log node_lost detected_by
connection, re-form at world 2 and finish, and no restart is spent."""

import glob
import json
import os
import signal
import sys

import ddptest
from ddptest import check
from store.store_servers import ddp_store

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold_worker.py")


def records(out_dir, world):
    found = []
    for path in glob.glob(os.path.join(out_dir, f"env_rank*_world{world}_*.json")):
        with open(path) as f:
            found.append(json.load(f)["env"])
    return found


out_dir = ddptest.temp_dir()
agents = []
try:
    with ddp_store() as server:
        for i in range(3):
            cmd = [ddptest.bin_path("ddprun"), "--nnodes=2:3", "--nproc_per_node=1",
                   "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{server.port}",
                   "--rdzv_id=lease", f"--event_log={out_dir}/events{i}.jsonl",
                   "--python", sys.executable, WORKER, out_dir, "3"]
            agents.append(ddptest.spawn(cmd, stdout=ddptest.subprocess.PIPE,
                                        stderr=ddptest.subprocess.PIPE, text=True))
        check(ddptest.wait_until(lambda: len(records(out_dir, 3)) == 3, 60),
              f"{len(records(out_dir, 3))} of 3 workers started")
        os.killpg(agents[2].pid, signal.SIGKILL)
        for i in (0, 1):
            _, err = agents[i].communicate(timeout=60)
            check(agents[i].returncode == 0, f"survivor {i} exited {agents[i].returncode}\n{err}")
            events = [json.loads(line) for line in open(f"{out_dir}/events{i}.jsonl")]
            lost = [e for e in events if e["event"] == "node_lost"]
            check(len(lost) == 1 and lost[0]["detected_by"] == "connection",
                  f"survivor {i}: node_lost events {lost}")
            spent = {e["restart_spent"] for e in events if e["event"] == "restart"}
            check(spent == {0}, f"survivor {i}: restarts spent {spent}")
        check({r["TORCHELASTIC_RESTART_COUNT"] for r in records(out_dir, 2)} == {"0"},
              "the loss spent a restart")
        _, store_err = server.stop()
        check("expired" in store_err, f"the store never expired the lease:\n{store_err}")
    print("ok ddp-store serve: a SIGKILLed agent was lost by its closed connection")
except ddptest.subprocess.TimeoutExpired:
    ddptest.fail("survivors did not finish in 60 s")
finally:
    for p in agents:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    ddptest.remove_tree(out_dir)
