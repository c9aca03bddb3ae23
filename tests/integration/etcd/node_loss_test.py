"""etcd rendezvous, --nnodes=2:3 with 3 agents x 2 workers: while the job runs, an etcd member is
killed (the agents on it move their keep-alives and watches to the other members), then
the agent at group rank 0, which hosts the workers' store, is SIGKILLed. Its lease expires; the
other two restart at world 4 with a store hosted by one of them, spend no restart, and finish.
"""

import glob
import json
import os
import re
import signal
import sys
import time

import ddptest
import etcdtest
from ddptest import check

HOLD = os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode/hold_worker.py")


def envs(out_dir, world):
    return [json.load(open(f))["env"]
            for f in glob.glob(os.path.join(out_dir, f"env_rank*_world{world}_attempt*.json"))]


work = ddptest.temp_dir("ddptest_etcd_loss_")
procs = []
try:
    with etcdtest.Cluster() as cluster:
        cmd = etcdtest.agent_cmd(cluster.endpoints, "loss", "2:3", 2,
                                 [sys.executable, HOLD, work, "6"],
                                 conf="lease_ttl=2,last_call_timeout=1", extra=["--max_restarts=0"])
        procs, logs = etcdtest.spawn_agents([cmd] * 3, work, "agent")
        started = ddptest.wait_until(lambda: len(envs(work, 6)) == 6, 60)
        check(started, f"the first round did not start 6 workers:\n"
                       + "\n".join(etcdtest.read(l) for l in logs))
        first_master = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs(work, 6)}
        check(len(first_master) == 1, f"several stores in world 6: {first_master}")

        host = [i for i, l in enumerate(logs) if "group_rank=0 " in etcdtest.read(l)]
        check(len(host) == 1, f"group rank 0 in {len(host)} agent logs")
        # Kill the etcd member a surviving agent uses: its keep-alives and its round's watch
        # must move to another member for it to see the loss and go on.
        survivor = etcdtest.read(logs[(host[0] + 1) % 3])
        members = cluster.endpoints.split(",")
        used = [i for i, m in enumerate(members) if f"via etcd member {m}" in survivor]
        check(len(used) == 1, f"which etcd member the survivor uses: {used}")
        cluster.kill_member(used[0])
        time.sleep(3)  # longer than the TTL: keep-alives must have moved to another member

        os.kill(procs[host[0]].pid, signal.SIGKILL)
        procs[host[0]].wait()

        survivors = [p for i, p in enumerate(procs) if i != host[0]]
        codes = etcdtest.wait_all(survivors, 60)
        texts = [etcdtest.read(l) for i, l in enumerate(logs) if i != host[0]]
        for code, text in zip(codes, texts):
            check(code == 0, f"surviving agent exited {code}:\n{text}")
            check(re.search(r"round 0 changes: lost node\(s\): ", text),
                  f"the node loss was not seen:\n{text}")
        world4 = envs(work, 4)
        ranks = sorted(int(e["RANK"]) for e in world4)
        check(ranks == [0, 1, 2, 3], f"ranks of the world-4 round: {ranks}")
        check(all(e["TORCHELASTIC_RESTART_COUNT"] == "0" for e in world4),
              "a node loss spent a restart")
        second_master = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in world4}
        check(len(second_master) == 1 and second_master != first_master,
              f"the world-4 round's store {second_master} (the lost host's was {first_master})")
        print(f"ok store host lost: 2 agents restarted at world 4 with store {second_master}, "
              f"no restart spent; etcd member {members[used[0]]} (a survivor's) down throughout")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
