"""issue 34, found by the soak (seed 43, etcd, two_nodes): two nodes SIGKILLed at once re-formed
only after the second node's lease expired (3.4 s with lease_ttl=3). The first loss found by
connection ends the round; the second node's link went to a host that had stopped watching the
round, or was the host itself (killed with it), so nobody saw its connection close. The forming
round now asks the link store of each member that has not joined yet, and declares lost a member
whose agent's port refuses connections.

Four agents (--nnodes=2:4, one hold_worker each, lease_ttl=60 and last_call_timeout=600, so that
only a loss found by connection re-forms within the test): the round's host (group rank 0) and
one other node SIGKILLed at once; the other two re-form at world 2 and finish.

With the argument `two_members` (the soak's seed 44, etcd, restart): two members other than the
host SIGKILLed 150 ms apart. The first's loss (by its link, 300 ms after its death) ends the
round; the host's plan keeps the second, whose link the host stopped watching with the round,
and the derived round waited for its lease. The derived round's host now asks the link stores of
the members that have not put their record."""

import glob
import json
import os
import signal
import sys
import time

import ddptest
import etcdtest
from ddptest import check

HOLD = os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode/hold_worker.py")


def envs(world):
    found = []
    for path in glob.glob(os.path.join(work, f"env_rank*_world{world}_attempt*.json")):
        with open(path) as f:
            found.append(json.load(f))
    return found


def agent_of(worker_pid):
    """The index of the agent whose child `worker_pid` is."""
    with open(f"/proc/{worker_pid}/stat") as f:
        parent = int(f.read().rsplit(")", 1)[1].split()[1])
    return next(i for i, p in enumerate(procs) if p.pid == parent)


two_members = sys.argv[1:] == ["two_members"]
work = ddptest.temp_dir("ddptest_etcd_soak_two_host_")
procs = []
try:
    etcdtest.require_etcd()
    with etcdtest.Cluster() as cluster:
        # Two members apart pass through world 3 (the plan keeps the second): hold there too, so
        # that a worker of that round does not finish before its agent sees the second loss.
        hold = "4,3" if two_members else "4"
        cmd = etcdtest.agent_cmd(cluster.endpoints, "soaktwohost", "2:4", 1,
                                 [sys.executable, HOLD, work, hold],
                                 conf="lease_ttl=60,last_call_timeout=600,join_timeout=600",
                                 extra=["--max_restarts=0"])
        procs, outs = etcdtest.spawn_agents([cmd] * 4, work, "agent")
        check(ddptest.wait_until(lambda: len(envs(4)) == 4, 60),
              "four workers did not start:\n" + "\n".join(etcdtest.read(o) for o in outs))
        by_group_rank = {int(e["env"]["GROUP_RANK"]): agent_of(e["pid"]) for e in envs(4)}
        victims = [by_group_rank[1] if two_members else by_group_rank[0], by_group_rank[2]]
        os.killpg(procs[victims[0]].pid, signal.SIGKILL)
        if two_members:
            time.sleep(0.15)  # the first loss is then found alone, and ends the round
        os.killpg(procs[victims[1]].pid, signal.SIGKILL)
        survivors = [p for i, p in enumerate(procs) if i not in victims]
        # The leases would take 60 s.
        ddptest.wait_until(lambda: all(p.poll() is not None for p in survivors), 45)
        for p in survivors:
            check(p.poll() is not None, f"survivor pid {p.pid} still running after 45 s:\n" +
                  "\n".join(etcdtest.read(o) for o in outs))
        codes = [p.returncode for p in survivors]
        for p, code in zip(survivors, codes):
            out = outs[procs.index(p)]
            check(code == 0, f"survivor pid {p.pid} exited {code}:\n{etcdtest.read(out)}")
        ranks = sorted(e["env"]["RANK"] for e in envs(2))
        check(ranks == ["0", "1"], f"ranks at world 2: {ranks}")
        what = ("two members killed 150 ms apart" if two_members
                else "the round's host and another node killed at once")
        print(f"ok etcd, {what}: both found by connection, the survivors re-formed at world 2 "
              "and finished")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
