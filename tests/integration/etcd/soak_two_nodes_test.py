"""issue 34, found by the soak (seed 4, etcd, two_nodes): two nodes SIGKILLed at once. The first
lease to expire ended the round; the survivors counted the second node, whose lease had not
expired yet, among the next round's expected members, and waited the whole last-call timeout for
it (30 s by default) before re-forming without it.

Four agents (--nnodes=2:4, one hold_worker each, last_call_timeout=600 so that only the fix can
re-form in time), two SIGKILLed 1 s apart, both before the first lease ends: the other two re-form
at world 2 and finish within the test's 90 s. When the first loss alone is seen, the survivors
derive a round of three that still holds the second node (as c10d's do); its workers hold there
as a real job's would (a dead peer's workers never meet them), and the second lease's end derives
world 2. The job's links (loss by connection) are held off with a connection grace longer than
the test, so that the leases find both losses, as they do when links are silent (cut)."""

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


def started(world):
    return len(glob.glob(os.path.join(work, f"env_rank*_world{world}_attempt*.json")))


work = ddptest.temp_dir("ddptest_etcd_soak_two_")
procs = []
try:
    etcdtest.require_etcd()
    with etcdtest.Cluster() as cluster:
        cmd = etcdtest.agent_cmd(cluster.endpoints, "soaktwo", "2:4", 1,
                                 [sys.executable, HOLD, work, "4,3"],
                                 conf="lease_ttl=2,last_call_timeout=600,join_timeout=600,"
                                      "connection_grace_ms=600000",
                                 extra=["--max_restarts=0"])
        procs, outs = etcdtest.spawn_agents([cmd] * 4, work, "agent")
        check(ddptest.wait_until(lambda: started(4) == 4, 60),
              "four workers did not start:\n" + "\n".join(etcdtest.read(o) for o in outs))
        # Killed 1 s apart, so that etcd (which revokes expired leases in batches every 0.5 s)
        # ends the two leases at different moments, as it did in the soak.
        os.killpg(procs[2].pid, signal.SIGKILL)
        time.sleep(1.0)
        os.killpg(procs[3].pid, signal.SIGKILL)
        for victim in (2, 3):
            procs[victim].wait()
        codes = etcdtest.wait_all(procs[:2], 90)
        for i, code in enumerate(codes):
            check(code == 0, f"survivor {i} exited {code}:\n{etcdtest.read(outs[i])}")
        ranks = sorted(json.load(open(f))["env"]["RANK"]
                       for f in glob.glob(os.path.join(work, "env_rank*_world2_attempt*.json")))
        check(ranks == ["0", "1"], f"ranks at world 2: {ranks}")
        print("ok etcd, two nodes killed at once: the survivors re-formed at world 2 and finished")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
