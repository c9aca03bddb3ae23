"""etcd rendezvous, loss by connection (docs/rendezvous.md): at the default lease_ttl (10 s), a
SIGKILLed node is found by its closed link to the round's host, not by its lease. Two jobs of
three agents (--nnodes=2:3, one hold_worker each, --max_restarts=0, each with its --event_log):
in the first the killed node (agent and workers) is a member, so the host's link store declares
it; in the second it is the host (group rank 0), so the members, refused by its link store,
declare it. Each time both survivors log node_lost for the dead node, detected_by "connection"
(not "lease"), before their restart, then rendezvous in round 1 at world 2, start their workers
and finish; the dead node's lease was revoked (etcd answers "already expired") rather than left
to run out."""

import os
import re
import signal
import subprocess
import sys

import ddptest
import etcdtest
from ddptest import check

HOLD = os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode/hold_worker.py")

events = etcdtest.events


def lease_state(endpoints, lease_hex):
    result = subprocess.run(["etcdctl", f"--endpoints={endpoints}", "lease", "timetolive",
                             lease_hex], env=dict(os.environ, ETCDCTL_API="3"),
                            capture_output=True, text=True, timeout=30)
    return result.stdout + result.stderr


def run_job(cluster, work, tag, kill_host):
    logs = [os.path.join(work, f"{tag}_events{i}.jsonl") for i in range(3)]
    cmds = [etcdtest.agent_cmd(cluster.endpoints, f"link{tag}", "2:3", 1,
                               [sys.executable, HOLD, work, "3"],
                               extra=["--max_restarts=0", f"--event_log={log}"])
            for log in logs]
    procs, outs = etcdtest.spawn_agents(cmds, work, f"{tag}_agent")
    try:
        check(ddptest.wait_until(lambda: all(any(e["event"] == "workers_started" for e in
                                                 events(log)) for log in logs), 60),
              "three agents did not start their workers:\n" +
              "\n".join(etcdtest.read(o) for o in outs))
        texts = [etcdtest.read(o) for o in outs]
        hosts = [i for i, t in enumerate(texts) if "group_rank=0 " in t]
        check(len(hosts) == 1, f"group rank 0 in {len(hosts)} agent logs")
        victim = hosts[0] if kill_host else (hosts[0] + 1) % 3
        lease = re.search(r"node (\S+) holds lease ([0-9a-f]+) \(ttl (\d+) s\)", texts[victim])
        check(lease is not None and lease.group(3) == "10",
              f"the victim's lease (default ttl) in its log:\n{texts[victim]}")
        name = lease.group(1)
        os.killpg(procs[victim].pid, signal.SIGKILL)
        procs[victim].wait()
        survivors = [i for i in range(3) if i != victim]
        codes = etcdtest.wait_all([procs[i] for i in survivors], 60)
        for i, code in zip(survivors, codes):
            seen = events(logs[i])
            check(code == 0, f"survivor {i} exited {code}:\n{etcdtest.read(outs[i])}")
            kinds = [e["event"] for e in seen]
            lost = [e for e in seen if e["event"] == "node_lost"]
            check(len(lost) == 1 and lost[0]["node"] == name,
                  f"survivor {i} logged node_lost {lost} (the victim is {name})")
            check(lost[0]["detected_by"] == "connection" and lost[0]["after_ms"] >= 300,
                  f"survivor {i}'s node_lost was not found by the closed link: {lost[0]}")
            # node_lost, the restart it causes, round 1's rendezvous, its workers: in that order.
            at = kinds.index("node_lost")
            rest = seen[at:]
            order = [e["event"] for e in rest if e["event"] in
                     ("node_lost", "restart", "rendezvous", "workers_started")]
            check(order[:4] == ["node_lost", "restart", "rendezvous", "workers_started"],
                  f"survivor {i}'s events after the loss: {order}")
            rdzv = next(e for e in rest if e["event"] == "rendezvous")
            check(rdzv["round"] == 1 and rdzv["group_world_size"] == 2,
                  f"survivor {i} re-formed as {rdzv}")
            restart = next(e for e in rest if e["event"] == "restart")
            check(restart["round_change"] == "node_lost" and restart["restart_spent"] == 0,
                  f"survivor {i}'s restart: {restart}")
        state = lease_state(cluster.endpoints, lease.group(2))
        check("already expired" in state, f"the victim's lease {lease.group(2)}: {state}")
        return name
    finally:
        etcdtest.kill_all(procs)


work = ddptest.temp_dir("ddptest_etcd_link_")
try:
    etcdtest.require_etcd()
    with etcdtest.Cluster() as cluster:
        member = run_job(cluster, work, "member", kill_host=False)
        host = run_job(cluster, work, "host", kill_host=True)
        print(f"ok etcd loss by connection at lease_ttl 10: a member ({member}) and the host "
              f"({host}) each found by the closed link, survivors re-formed in round 1")
finally:
    ddptest.remove_tree(work)
