"""etcd rendezvous, c10d's elastic semantics on a real 3-member etcd cluster: scale-up (a third
agent arriving at a running --nnodes=2:3 job waits, the running agents restart to admit it, no
restart spent); the job-wide restart budget (a worker failure on one of two agents spends one
restart for both, and both finish; the failure verdict comes from the roll call, not a lease
TTL); an exhausted budget ends the job on every agent, the healthy one naming the failure; a
SIGTERM while the verdict waits for a frozen peer ends the agent at once; a SIGTERMed agent
revokes its lease.
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
    # Only finished records: a worker writes NAME.json.tmp, then renames it.
    return [json.load(open(f))["env"] for f in glob.glob(os.path.join(out_dir, pattern))
            if f.endswith(".json")]


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

        # One failure, --max_restarts=1: one job-wide restart, both agents finish. The default
        # lease TTL (10 s): the failing agent's roll call, which both answer, rules out a lost
        # node instead of waiting out a TTL.
        out = os.path.join(work, "restart")
        os.makedirs(out)
        cmd = etcdtest.agent_cmd(cluster.endpoints, "restart", 2, 1,
                                 [FAIL_ONCE, out, "--rank", "1", "--code", "3"],
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
        failing = next(t for t in texts if "reported failure round=0" in t)
        check("failure verdict round=0: all 2 members answered the roll call" in failing
              and "no loss seen within the lease TTL" not in failing,
              f"the verdict did not come from the roll call:\n{failing}")
        print("ok one failure spends one job-wide restart (verdict: the roll call); both finish")

        # --max_restarts=0: the failure ends the job on both agents.
        cmd = etcdtest.agent_cmd(cluster.endpoints, "spent", 2, 1,
                                 ["/bin/sh", "-c", "sleep 0.5; exit $GROUP_RANK"],
                                 extra=["--max_restarts=0", "--no_python"])
        procs, logs = etcdtest.spawn_agents([cmd] * 2, work, "spent")
        codes, texts = finish(procs, logs)
        check(all(c != 0 for c in codes), f"exit codes {codes}")
        check(any("run=spent is closed: workers failed on node" in t for t in texts),
              "the healthy agent does not name the failure:\n" + "\n".join(texts))
        print("ok an exhausted restart budget ends the job on every agent")

        # SIGTERM while the failure verdict waits: the other agent is frozen (SIGSTOP), so it
        # answers no roll call and its lease lives on for up to 30 s; the signal ends the wait.
        out = os.path.join(work, "verdict")
        os.makedirs(out)
        script = (f"touch {out}/started_$GROUP_RANK; [ $GROUP_RANK = 0 ] && exec sleep 120; "
                  f"while [ ! -e {out}/go ]; do sleep 0.05; done; exit 3")
        cmds = [etcdtest.agent_cmd(cluster.endpoints, "verdict", 2, 1, ["/bin/sh", "-c", script],
                                   conf="lease_ttl=30",
                                   extra=["--max_restarts=3", "--no_python",
                                          f"--event_log={out}/events{i}.jsonl"])
                for i in range(2)]
        procs, logs = etcdtest.spawn_agents(cmds, work, "verdict")
        check(ddptest.wait_until(lambda: len(glob.glob(f"{out}/started_*")) == 2, 60),
              "the verdict job did not start")
        frozen = next(i for i, l in enumerate(logs) if "group_rank=0 " in etcdtest.read(l))
        failing = 1 - frozen
        os.kill(procs[frozen].pid, signal.SIGSTOP)
        open(f"{out}/go", "w").close()
        check(ddptest.wait_until(
            lambda: "failure verdict round=0: waiting up to" in etcdtest.read(logs[failing]), 60),
            "the failing agent did not wait for a verdict:\n" + etcdtest.read(logs[failing]))
        os.kill(procs[failing].pid, signal.SIGTERM)
        code = etcdtest.wait_all([procs[failing]], 20)[0]
        text = etcdtest.read(logs[failing])
        names = [json.loads(line)["event"] for line in open(f"{out}/events{failing}.jsonl")]
        check(code == 128 + signal.SIGTERM and "reported failure" not in text
              and names[-3:] == ["worker_exited", "workers_stopped", "finish"]
              and "restart" not in names,
              f"exit code {code}, events {names}:\n{text}")
        os.kill(procs[frozen].pid, signal.SIGCONT)
        etcdtest.kill_all(procs)
        print("ok SIGTERM during the failure verdict: exit 143 at once, no restart spent")

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
