"""issue 34, found by the soak (seed 4, etcd, node_kill): an etcd job's survivors re-formed after a
node's agent was SIGKILLed but logged no node_lost event (only a restart with round_change
node_lost), so the event log and the node-loss metric missed every loss of an etcd job.

Three agents (--nnodes=2:3, one hold_worker each, each with its --event_log), one SIGKILLed while
the job runs: both survivors log node_lost for it, detected_by "connection" (its closed link to
the round's host, or the host's refused link store, found it: etcd_links.hpp), with at least the
connection grace as after_ms, then re-form at world 2 and finish."""

import os
import signal
import sys

import ddptest
import etcdtest
from ddptest import check

HOLD = os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode/hold_worker.py")

events = etcdtest.events


work = ddptest.temp_dir("ddptest_etcd_soak_kill_")
procs = []
try:
    etcdtest.require_etcd()
    with etcdtest.Cluster() as cluster:
        logs = [os.path.join(work, f"events{i}.jsonl") for i in range(3)]
        cmds = [etcdtest.agent_cmd(cluster.endpoints, "soakkill", "2:3", 1,
                                   [sys.executable, HOLD, work, "3"], conf="lease_ttl=2",
                                   extra=["--max_restarts=0", f"--event_log={log}"])
                for log in logs]
        procs, outs = etcdtest.spawn_agents(cmds, work, "agent")
        check(ddptest.wait_until(lambda: all(any(e["event"] == "workers_started" for e in
                                                 events(log)) for log in logs), 60),
              "three agents did not start their workers:\n" +
              "\n".join(etcdtest.read(o) for o in outs))
        victim = 2
        os.killpg(procs[victim].pid, signal.SIGKILL)
        procs[victim].wait()
        survivors = [i for i in range(3) if i != victim]
        codes = etcdtest.wait_all([procs[i] for i in survivors], 60)
        for i, code in zip(survivors, codes):
            check(code == 0, f"survivor {i} exited {code}:\n{etcdtest.read(outs[i])}")
            lost = [e for e in events(logs[i]) if e["event"] == "node_lost"]
            check(len(lost) == 1, f"survivor {i} logged {len(lost)} node_lost events: "
                                  f"{events(logs[i])}")
            check(lost[0]["detected_by"] == "connection" and lost[0]["after_ms"] >= 300,
                  f"survivor {i}'s node_lost: {lost[0]}")
        print("ok etcd node kill: both survivors logged node_lost (connection) and finished")
finally:
    etcdtest.kill_all(procs)
    ddptest.remove_tree(work)
