"""etcd rendezvous, c10d's elastic semantics on a real 3-member etcd cluster: scale-up (a third
agent arriving at a running --nnodes=2:3 job waits, the running agents restart to admit it, no
restart spent); the job-wide restart budget (a worker failure on one of two agents spends one
restart for both, and both finish); an exhausted budget ends the job on every agent, the healthy
one naming the failure.
"""

import glob
import json
import os
import signal
import sys

import ddptest
import etcdtest
from ddptest import check

WORKERS = os.path.join(ddptest.SOURCE_DIR, "tests/integration")
HOLD = os.path.join(WORKERS, "multinode/hold_worker.py")
FAIL_ONCE = os.path.join(WORKERS, "workers/fail_once.py")


def files(out_dir, pattern):
    return [json.load(open(f))["env"] for f in glob.glob(os.path.join(out_dir, pattern))]


def finish(procs, logs, timeout=60):
    codes = etcdtest.wait_all(procs, timeout)
    return codes, [etcdtest.read(l) for l in logs]


work = ddptest.temp_dir("ddptest_etcd_elastic_")
procs = []
try:
    with etcdtest.Cluster() as cluster:
        # Scale-up: two agents run world 4; a third arrives.
        out = os.path.join(work, "scale")
        os.makedirs(out)
        cmd = etcdtest.agent_cmd(cluster.endpoints, "scale", "2:3", 2,
                                 [sys.executable, HOLD, out, "4"], conf="last_call_timeout=1")
        procs, logs = etcdtest.spawn_agents([cmd] * 2, work, "scale")
        check(ddptest.wait_until(lambda: len(files(out, "*_world4_*.json")) == 4, 60),
              "world 4 did not start")
        late, late_logs = etcdtest.spawn_agents([cmd], work, "late")
        procs += late
        codes, texts = finish(procs, logs + late_logs)
        check(codes == [0, 0, 0], f"exit codes {codes}:\n" + "\n".join(texts))
        world6 = files(out, "*_world6_*.json")
        check(sorted(int(e["RANK"]) for e in world6) == list(range(6)), "ranks of world 6")
        check(all(e["TORCHELASTIC_RESTART_COUNT"] == "0" for e in world6),
              "scale-up spent a restart")
        check("waiting for the next round" in texts[2], f"the late agent:\n{texts[2]}")
        check(all("node(s) waiting to join" in t for t in texts[:2]), "running agents not told")
        print("ok scale-up: a third agent joined a running 2:3 job at world 6, no restart spent")

        # One failure, --max_restarts=1: one job-wide restart, both agents finish. (A short lease
        # TTL: a failure with every node alive waits a TTL + 1.5 s for a loss before it counts.)
        out = os.path.join(work, "restart")
        os.makedirs(out)
        cmd = etcdtest.agent_cmd(cluster.endpoints, "restart", 2, 1,
                                 [FAIL_ONCE, out, "--rank", "1", "--code", "3"], conf="lease_ttl=2",
                                 extra=["--max_restarts=1", "--python", sys.executable])
        procs, logs = etcdtest.spawn_agents([cmd] * 2, work, "restart")
        codes, texts = finish(procs, logs)
        check(codes == [0, 0], f"exit codes {codes}:\n" + "\n".join(texts))
        attempts = sorted((e["RANK"], e["TORCHELASTIC_RESTART_COUNT"])
                          for e in files(out, "env_rank*.json"))
        check(attempts == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")],
              f"(rank, restart count) of every start: {attempts}")
        check(sum("reported failure round=0 restart_count=1" in t for t in texts) == 1,
              "exactly one agent must spend the restart")
        print("ok one failure spends one job-wide restart; both agents restart and finish")

        # --max_restarts=0: the failure ends the job on both agents.
        cmd = etcdtest.agent_cmd(cluster.endpoints, "spent", 2, 1,
                                 ["/bin/sh", "-c", "sleep 0.5; exit $GROUP_RANK"],
                                 conf="lease_ttl=2", extra=["--max_restarts=0", "--no_python"])
        procs, logs = etcdtest.spawn_agents([cmd] * 2, work, "spent")
        codes, texts = finish(procs, logs)
        check(all(c != 0 for c in codes), f"exit codes {codes}")
        check(any("run=spent is closed: workers failed on node" in t for t in texts),
              "the healthy agent does not name the failure:\n" + "\n".join(texts))
        print("ok an exhausted restart budget ends the job on every agent")

        # SIGTERM: the agent revokes its lease on the way out.
        out = os.path.join(work, "term")
        os.makedirs(out)
        cmd = etcdtest.agent_cmd(cluster.endpoints, "term", "2:3", 1,
                                 [sys.executable, HOLD, out, "3"],
                                 conf="lease_ttl=120,last_call_timeout=1")
        procs, logs = etcdtest.spawn_agents([cmd] * 3, work, "term")
        check(ddptest.wait_until(lambda: len(files(out, "*_world3_*.json")) == 3, 60),
              "world 3 did not start")
        leaving = next(i for i, l in enumerate(logs) if "group_rank=2 " in etcdtest.read(l))
        os.kill(procs[leaving].pid, signal.SIGTERM)
        others = [p for i, p in enumerate(procs) if i != leaving]
        codes, texts = finish(others, [l for i, l in enumerate(logs) if i != leaving])
        check(codes == [0, 0], f"exit codes {codes}:\n" + "\n".join(texts))
        check(sorted(int(e["RANK"]) for e in files(out, "*_world2_*.json")) == [0, 1],
              "the two remaining agents did not restart at world 2")
        print("ok an agent ended by SIGTERM revokes its lease: the others restart at once")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
