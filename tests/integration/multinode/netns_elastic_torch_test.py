"""Elastic recovery with real PyTorch 1.13 gloo DDP workers that checkpoint and resume, on three
network-namespace nodes under --nnodes=2:3 --max_restarts=3 (keep_alive_interval=1,
keep_alive_max_attempt=2). One rig bring-up, three jobs:

kills: the agent of node 3 is SIGKILLed 0.3, 0.9 and 1.5 s after an epoch's barrier (a fresh
  agent rejoins node 3 between kills). Each time both survivors run new workers at world 2 that
  resume from the checkpoint, no restart is spent, and the event logs say node_lost
  (detected_by connection) and restart_spent 0.
cut+fail: a worker exits 3 with every node alive (a restart is spent), then node 3's link is cut
  (no process dies): heartbeats declare it lost and the survivors re-form at world 2 without
  spending another restart.
Both jobs finish with identical parameters on every rank and leave no process behind.
With the argument `forkserver` (issue 30), only the kills job runs, under --start_method=forkserver
on every node: each node's template forks its workers, the survivors' new workers too.
static: in a static 3-node job the agent of node 3 is SIGKILLed: the others end the job naming
  the lost node (node rank 2), without spending a restart, and leave no process behind."""

import glob
import json
import os
import signal
import sys
import time

import ddptest
import netns_rig
from ddptest import check
from netns_rig import Cluster, check_no_processes
from torch_elastic_records import latest_barrier, starts

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_elastic_worker.py")
FORKSERVER = "forkserver" in sys.argv[1:]


def agent_args(rdzv_id, out_dir, node, worker_args=()):
    args = netns_rig.c10d_args("2:3", rdzv_id)
    args[args.index("--python") + 1] = ddptest.TORCH_PYTHON
    log = os.path.join(out_dir, f"events_n{node}_{time.time():.3f}.jsonl")
    if FORKSERVER:
        args += ["--start_method=forkserver", "--log_level=info"]
    return args + ["--max_restarts=3", f"--event_log={log}", WORKER, out_dir, *worker_args]


def wait_starts(out_dir, world, after, what, count=None):
    count = count or world
    ok = ddptest.wait_until(lambda: len(starts(out_dir, world, after)) >= count, 90, 0.05)
    check(ok, f"{what}: {len(starts(out_dir, world, after))} of {count} workers started at "
              f"world {world}")
    return starts(out_dir, world, after)


def next_barrier(out_dir, world, after, min_epoch):
    """Waits for rank 0 to pass an epoch barrier at `world` later than `after`; returns its time."""
    found = ddptest.wait_until(lambda: latest_barrier(out_dir, world, after, min_epoch), 60, 0.01)
    check(found, f"no epoch barrier at world {world} after {after}")
    return found


def events(out_dir, node):
    result = []
    for path in sorted(glob.glob(os.path.join(out_dir, f"events_n{node}_*.jsonl"))):
        with open(path) as f:
            result += [json.loads(line) for line in f if line.strip()]
    return result


def finish_job(c, out_dir, survivors, what):
    open(os.path.join(out_dir, "stop"), "w").close()
    for n in survivors:
        rc, err = netns_rig.finish(c.agents_by_node[n], 120, f"{what}: agent on node {n}")
        check(rc == 0, f"{what}: agent on node {n} exited {rc}\n{err[-3000:]}")
        check(not FORKSERVER or "forkserver ready" in err,
              f"{what}: node {n}'s workers were not forked from a template\n{err[-3000:]}")
    results = [json.load(open(p)) for p in glob.glob(os.path.join(out_dir, "result_r*.json"))]
    check(len(results) == 2 and {r["world"] for r in results} == {2},
          f"{what}: results {[(r['world']) for r in results]}")
    check(len({tuple(r["params"]) for r in results}) == 1, f"{what}: parameters differ")


def kills(c, out_dir, env, tag):
    start = lambda n: c.start_node(n, agent_args(f"kills-{tag}", out_dir, n), env)
    for n in (1, 2, 3):
        start(n)
    last = wait_starts(out_dir, 3, 0.0, "kills: first round")
    for offset in (0.3, 0.9, 1.5):
        since = max(s["init_time"] for s in last)
        barrier = next_barrier(out_dir, 3, since, 1)
        time.sleep(max(0.0, barrier + offset - time.time()))
        killed_at = time.time()
        os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
        c.agents_by_node[3].wait()
        survivors = wait_starts(out_dir, 2, killed_at, f"kill {offset} s after a barrier")
        recovery = max(s["init_time"] for s in survivors) - killed_at
        print(f"kill {offset} s after a barrier: survivors past init_process_group after "
              f"{recovery:.2f} s", flush=True)
        check({s["restart_count"] for s in survivors} == {0},
              f"kill at {offset} s spent a restart: {survivors}")
        check(min(s["resumed_epoch"] for s in survivors) >= 1,
              f"kill at {offset} s: workers did not resume from the checkpoint: {survivors}")
        if offset != 1.5:
            rejoin = time.time()
            start(3)
            last = wait_starts(out_dir, 3, rejoin, f"node 3 rejoining after the {offset} s kill")
    finish_job(c, out_dir, (1, 2), "kills")
    for n in (1, 2):
        log = events(out_dir, n)
        lost = [e for e in log if e["event"] == "node_lost"]
        check(len(lost) == 3 and {e["detected_by"] for e in lost} == {"connection"},
              f"kills: node {n} node_lost events: {lost}")
        spent = [e["restart_spent"] for e in log if e["event"] == "restart"]
        check(spent and set(spent) == {0}, f"kills: node {n} restarts spent: {spent}")
    check_no_processes(tag, "kills")


def cut_and_fail(c, out_dir, env, tag):
    for n in (1, 2, 3):
        c.start_node(n, agent_args(f"cut-{tag}", out_dir, n, ["--fail", "1:1:0"]), env)
    restarted = wait_starts(out_dir, 3, 0.0, "worker exit 3", count=6)
    again = [s for s in restarted if s["restart_count"] == 1]
    check(len(again) == 3, f"a worker exit with every node alive spent no restart: {restarted}")
    since = max(s["init_time"] for s in again)
    next_barrier(out_dir, 3, since, 1)
    cut_at = time.time()
    c.cut(3)
    survivors = wait_starts(out_dir, 2, cut_at, "cut link")
    print(f"cut link: survivors past init_process_group after "
          f"{max(s['init_time'] for s in survivors) - cut_at:.2f} s", flush=True)
    check({s["restart_count"] for s in survivors} == {1},
          f"cut link spent a restart: {survivors}")
    finish_job(c, out_dir, (1, 2), "cut+fail")
    # Cut off, node 3's agent cannot reach the store: it gives up (read_timeout) and its workers
    # go with it.
    rc, err = netns_rig.finish(c.agents_by_node[3], 60, "cut off agent on node 3")
    check(rc != 0, "the cut-off agent on node 3 exited 0")
    spent = [e["restart_spent"] for n in (1, 2, 3) for e in events(out_dir, n)
             if e["event"] == "restart"]
    check(sum(spent) == 1, f"cut+fail: restarts spent over the nodes: {spent}")
    for n in (1, 2):
        log = events(out_dir, n)
        lost = [e for e in log if e["event"] == "node_lost"]
        check(lost and lost[0]["detected_by"] == "heartbeat",
              f"cut: node {n} node_lost events: {lost}")
        last = [e for e in log if e["event"] == "restart"][-1]
        check(last["restart_spent"] == 0, f"cut: node {n} spent a restart: {last}")
    check_no_processes(tag, "cut+fail")


def static_loss(c, out_dir, env, tag):
    for n in (1, 2, 3):
        args = ["--nnodes=3", f"--node_rank={n - 1}", f"--master_addr={netns_rig.addr(1)}",
                "--master_port=29500", "--nproc_per_node=1", "--max_restarts=3",
                "--python", ddptest.TORCH_PYTHON, WORKER, out_dir]
        c.start_node(n, args, env)
    since = max(s["init_time"] for s in wait_starts(out_dir, 3, 0.0, "static"))
    next_barrier(out_dir, 3, since, 1)
    os.killpg(c.agents_by_node[3].pid, signal.SIGKILL)
    for n in (1, 2):
        rc, err = netns_rig.finish(c.agents_by_node[n], 60, f"static: agent on node {n}")
        check(rc != 0, f"static: agent on node {n} exited 0 after node 3 was lost")
        check("node 2 (" in err and "was lost" in err,
              f"static: agent on node {n} did not name the lost node\n{err[-3000:]}")
    spent = {s["restart_count"] for s in starts(out_dir, 3)}
    check(spent == {0}, f"static: the loss spent a restart: {spent}")
    check_no_processes(tag, "static")


class ElasticCluster(Cluster):
    def rig_heal(self, node):
        netns_rig.rig("heal", str(node))


tag, env = netns_rig.torch_job_env()
dirs = [ddptest.temp_dir(), ddptest.temp_dir(), ddptest.temp_dir()]
try:
    with ElasticCluster(3) as c:
        kills(c, dirs[0], env, tag)
        print("ok SIGKILL of node 3's agent at 0.3, 0.9, 1.5 s: survivors resumed at world 2, "
              f"no restart spent{' (forkserver on every node)' if FORKSERVER else ''}", flush=True)
        if FORKSERVER:
            sys.exit(0)
        cut_and_fail(c, dirs[1], env, tag)
        print("ok worker exit 3 spent a restart; a cut link did not", flush=True)
        c.rig_heal(3)
        static_loss(c, dirs[2], env, tag)
        print("ok static: a lost node ended the job, naming it", flush=True)
finally:
    for d in dirs:
        ddptest.remove_tree(d)
