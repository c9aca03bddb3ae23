"""The etcd in-process soak's seed 31 fault (during_recovery), made deterministic: three agents
on a real 3-member etcd cluster on loopback, --nnodes=2:3, --recovery=inprocess, the forkserver,
one real PyTorch 1.13 gloo DDP worker each (tests/integration/multinode/inprocess_worker.py).
Node 1's worker is SIGKILLed: its agent spends a restart and starts a newcomer, which waits
NEWCOMER_DELAY seconds before it connects (--delay_newcomer), and the next round forms at world
3 with node 3's worker kept. The moment node 1's agent reports the newcomer started, node 2
(agent and worker) is SIGKILLed: the round ends again while node 3's worker waits in its group
init for the two others (its init fails when that round's store goes), and before the newcomer
has taken any place. Node 2's kept worker waits DELAY_REFORM seconds before it enters that
round's group (--delay_reform), so it dies before node 3's worker could have met it there: a
peer met in gloo's connect and then gone would block node 3's worker past any store (gloo 1.13
has no abort), and it would give up its process (docs/elastic.md), a path of its own. The
newcomer then enters its first group in the round after, with node 3's
worker, whose failed init must not have left it out of step with a fresh process.

What must follow: node 3's worker (the only one holding the commits) keeps its process and
re-forms at world 2 with node 1's newcomer from its last commit (no step done twice, none lost,
equal parameters); no hand-over fails (node 1's agent neither waits for the newcomer, which has
not connected yet, nor stops it); no worker exits with an error of its own; both agents exit
0."""

import os
import signal
import sys
import time
import uuid

import ddptest
import etcdtest
from ddptest import check

sys.path.insert(0, os.path.join(ddptest.SOURCE_DIR, "tests/integration/multinode"))
from inprocess_rig import WORKER, check_trained_once, records, wait_steps  # noqa: E402

NEWCOMER_DELAY = 3  # seconds a started-again worker waits before its first train()
DELAY_REFORM = 2  # seconds node 2's kept worker waits before it re-forms (it dies meanwhile)
REFORM_TIMEOUT = 60  # far above a re-form; a survivor that waits it out fails the step checks


def agent(endpoints, out_dir, node):
    log = os.path.join(out_dir, f"events_n{node}.jsonl")
    delay = ["--delay_reform", str(DELAY_REFORM)] if node == 2 else []
    return etcdtest.agent_cmd(
        endpoints, "soak-seed31", "2:3", 1,
        [WORKER, out_dir, "--node", str(node), "--delay_newcomer", str(NEWCOMER_DELAY)] + delay,
        conf=f"lease_ttl=2,last_call_timeout=1,reform_timeout={REFORM_TIMEOUT}",
        extra=["--recovery=inprocess", "--max_restarts=3", "--start_method=forkserver",
               f"--event_log={log}", "--python", ddptest.TORCH_PYTHON])


def last_step(out_dir, node):
    return max([r["step"] for r in records(out_dir, node) if r["kind"] == "step"], default=-1)


def started(out_dir, node):
    return [e for e in etcdtest.events(os.path.join(out_dir, f"events_n{node}.jsonl"))
            if e["event"] == "workers_started"]


ddptest.require_torch()
tag = uuid.uuid4().hex[:12]
work = ddptest.temp_dir("ddptest_etcd_seed31_")
procs, logs = [], []
try:
    with etcdtest.Cluster() as cluster:
        os.environ.update(GLOO_SOCKET_IFNAME="lo", DDP_TEST_TAG=tag)  # the agents inherit it
        procs, logs = etcdtest.spawn_agents([agent(cluster.endpoints, work, n) for n in (1, 2, 3)],
                                            work, "agent")
        agent_logs = lambda: "\n".join(etcdtest.read(log)[-4000:] for log in logs)  # noqa: E731
        trained = ddptest.wait_until(lambda: all(last_step(work, n) >= 5 for n in (1, 2, 3)),
                                     120, 0.05)
        check(trained, "the three workers did not train at world 3:\n" + agent_logs())
        victim = records(work, 1)[-1]["pid"]
        survivor = records(work, 3)[-1]["pid"]
        os.kill(victim, signal.SIGKILL)
        newcomer = ddptest.wait_until(lambda: len(started(work, 1)) == 2, 60, 0.002)
        check(newcomer, "node 1's agent did not start a newcomer:\n" + agent_logs())
        os.killpg(procs[1].pid, signal.SIGKILL)  # node 2: its agent and its worker
        procs[1].wait()
        committed = last_step(work, 3)
        killed_at = time.time()

        steps = wait_steps(work, 2, 3, killed_at, "seed 31")
        open(os.path.join(work, "stop"), "w").close()
        codes = etcdtest.wait_all([procs[0], procs[2]], 120)
        check(codes == [0, 0], f"agents 1 and 3 exited {codes}:\n" + agent_logs())

        check_trained_once(work, "seed 31")
        entries = [r for r in records(work, 3) if r["kind"] == "entry" and r["world"] == 2]
        node3 = etcdtest.events(os.path.join(work, "events_n3.jsonl"))
        why = [e for e in node3 if e["event"] in ("worker_exited", "reform_failed", "reform")]
        check({r["pid"] for r in records(work, 3)} == {survivor},
              f"node 3's worker was replaced: {sorted({r['pid'] for r in records(work, 3)})}; "
              f"its agent's events: {why}\n" + etcdtest.read(logs[2])[-6000:])
        check(entries and entries[0]["step"] == committed + 1,
              f"node 3's worker resumed at world 2 at {entries[:1]}, its last commit was "
              f"step {committed}")
        firsts = [r for r in steps if r["rank"] == 0]
        check(min(r["step"] for r in firsts) == committed + 1,
              f"the first step at world 2 is not the one after the last commit {committed}: "
              f"{firsts[:3]}")
        for node in (1, 3):
            log = etcdtest.events(os.path.join(work, f"events_n{node}.jsonl"))
            failed = [e for e in log if e["event"] == "reform_failed"]
            check(not failed, f"node {node}: a hand-over failed: {failed}")
            own = [e for e in log if e["event"] == "worker_exited" and
                   e.get("exit_code", 0) not in (0, 75) and not e.get("stopped_by_agent")]
            check(not own, f"node {node}: a worker exited with an error of its own: {own}")
        check([len(e["pids"]) for e in started(work, 1)] == [1, 1],
              f"node 1 started workers other than the first and the newcomer: {started(work, 1)}")
        gone = ddptest.wait_until(lambda: not ddptest.processes_with_env(f"DDP_TEST_TAG={tag}"),
                                  30)
        check(gone, f"processes left: {ddptest.processes_with_env(f'DDP_TEST_TAG={tag}')}")
    print("ok etcd seed 31: a worker SIGKILLed, then another node while the newcomer started: "
          "the survivor kept its process and re-formed at world 2 from its last commit")
finally:
    etcdtest.kill_all(procs)
    if os.environ.get("DDP_KEEP_WORK"):
        print(f"kept {work}")
    else:
        ddptest.remove_tree(work)
