"""Regressions of --recovery=inprocess found by the fault soak (scripts/bench/soak.sh --seed 5):
workers blocked where they cannot take their new place. Real PyTorch 1.13 gloo DDP workers
(inprocess_worker.py) on network-namespace nodes under c10d, with reform_timeout=600 so that
only a worker that gives up its blocked process promptly lets the job go on within the test.

link_long (3 nodes): node 3's link is cut (no FIN or RST reaches anyone) until it is declared
  lost. The survivors' workers are blocked in a gloo collective with it; they leave their last
  commit in a file and end, their agents start them again in the new round, and the new
  processes resume from those files.
two_nodes (4 nodes): node 4 is SIGKILLed, then node 3 as soon as the survivors' next round
  (which still holds it) has formed: the survivors join a group that cannot form, and their
  agents must hand them the round after instead of waiting for their re-form in that one.

Both check that the survivors train at world 2 from their last commit (the first step at world 2
is the one after the newest step they had committed: none done twice), hold equal parameters,
leave no commit file behind, spend no restart, and finish with exit 0.

Usage: netns_inprocess_soak_test.py link_long|two_nodes"""

import glob
import os
import signal
import sys
import time

import ddptest
import netns_rig
from ddptest import check
from netns_rig import Cluster, check_no_processes
from inprocess_rig import agent_args, check_trained_once, events, records, wait_steps

GIVE_UP_EXIT = 75  # ddprun.elastic.GIVE_UP_EXIT


def start(c, out_dir, env, name, nodes, nnodes):
    for n in nodes:
        log_dir = os.path.join(out_dir, f"logs_n{n}")
        args = agent_args(f"soak-{name}", out_dir, n, 0, nnodes=nnodes, reform_timeout=600)
        c.start_node(n, [f"--log_dir={log_dir}", *args], env)
    wait_steps(out_dir, len(nodes), 5, 0.0, f"{name}: world {len(nodes)}")


def check_resumed(out_dir, survivors, fault_at, name):
    """The survivors trained at world 2 from their newest commit; returns the seconds from the
    fault to the first step completed at world 2."""
    steps = wait_steps(out_dir, 2, 3, fault_at, f"{name}: world 2")
    first = min(r["time"] for r in steps) - fault_at
    entries = [r for r in records(out_dir) if r["kind"] == "entry" and r["world"] == 2]
    check(entries, f"{name}: no entry at world 2")
    for entry in entries:
        done = [r["step"] for r in records(out_dir) if r["kind"] == "step" and
                r["node"] in survivors and r["time"] < entry["time"]]
        check(entry["step"] == max(done) + 1,
              f"{name}: entry at world 2 from step {entry['step']}, but the survivors had "
              f"committed step {max(done)}: {entry}")
    return first


def finish(c, out_dir, survivors, others, name):
    open(os.path.join(out_dir, "stop"), "w").close()
    for n in survivors:
        rc, err = netns_rig.finish(c.agents_by_node[n], 120, f"{name}: agent on node {n}")
        check(rc == 0, f"{name}: agent on node {n} exited {rc}\n{err[-3000:]}")
    for n in others:  # a cut node's agent is not part of the job any more
        if c.agents_by_node[n].poll() is None:
            os.killpg(c.agents_by_node[n].pid, signal.SIGKILL)
        c.agents_by_node[n].wait()
    check_trained_once(out_dir, name)
    left = glob.glob(os.path.join(out_dir, "**", "elastic_commit_*"), recursive=True)
    check(not left, f"{name}: commit files left behind: {left}")
    for n in survivors:
        log = events(out_dir, n)
        names = [e["event"] for e in log]
        check("restart" not in names, f"{name}: node {n} spent a restart: {names}")
        late = [e for e in log if e["event"] == "reform_failed" and e["reason"] == "timeout"]
        check(not late, f"{name}: node {n} waited for reform_timeout: {late}")


def given_up(out_dir, survivors):
    """How many survivor workers ended with GIVE_UP_EXIT (from the agents' event logs)."""
    return sum(1 for n in survivors for e in events(out_dir, n)
               if e["event"] == "worker_exited" and e.get("exit_code") == GIVE_UP_EXIT)


def link_long(c, out_dir, env):
    start(c, out_dir, env, "link_long", (1, 2, 3), "2:3")
    cut_at = time.time()
    c.cut(3)
    first = check_resumed(out_dir, (1, 2), cut_at, "link_long")
    gave_up = given_up(out_dir, (1, 2))
    finish(c, out_dir, (1, 2), (3,), "link_long")
    c.heal(3)
    print(f"link_long: first step at world 2 completed {first:.2f} s after the cut "
          f"({gave_up} workers gave up a blocked process)", flush=True)


def two_nodes(c, out_dir, env):
    start(c, out_dir, env, "two_nodes", (1, 2, 3, 4), "2:4")
    rounds = lambda: [e for e in events(out_dir, 1) if e["event"] == "rendezvous"]
    before = len(rounds())
    killed_at = time.time()
    os.killpg(c.agents_by_node[4].pid, signal.SIGKILL)
    # Node 3 dies once the survivors' next round (which still holds it) has formed, while its
    # worker joins that round's group: the moment the soak's sequence hit.
    check(ddptest.wait_until(lambda: len(rounds()) > before, 30, 0.005),
          "two_nodes: no round after node 4's loss")
    os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
    print(f"two_nodes: node 3 killed {time.time() - killed_at:.2f} s after node 4", flush=True)
    first = check_resumed(out_dir, (1, 2), killed_at, "two_nodes")
    gave_up = given_up(out_dir, (1, 2))
    finish(c, out_dir, (1, 2), (3, 4), "two_nodes")
    print(f"two_nodes: first step at world 2 completed {first:.2f} s after the first SIGKILL "
          f"({gave_up} workers gave up a blocked process)", flush=True)


case = sys.argv[1] if len(sys.argv) > 1 else ""
jobs = {"link_long": (link_long, 3), "two_nodes": (two_nodes, 4)}
check(case in jobs, f"usage: netns_inprocess_soak_test.py {'|'.join(jobs)}")
tag, env = netns_rig.torch_job_env()
out = ddptest.temp_dir()
try:
    with Cluster(jobs[case][1]) as c:
        jobs[case][0](c, out, env)
        check_no_processes(tag, case)
        print(f"ok {case}: the survivors resumed at world 2 from their last commit", flush=True)
finally:
    ddptest.remove_tree(out)
