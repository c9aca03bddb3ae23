"""A node joining a job under --recovery=inprocess, with real PyTorch DDP workers (gloo) on
network-namespace nodes, its workers started with exec and from the forkserver side by side
(docs/BENCHMARKS.md).

Three nodes (scripts/netns-cluster.sh) run tests/integration/multinode/inprocess_worker.py (DDP
through ddprun.elastic, one in-memory commit per step, a 0.05 s sleep after it) under c10d
--nnodes=3:4 --recovery=inprocess. Once every rank has committed STEPS steps at world 3, a fourth
node's agent starts; the running workers take it in at a commit (they keep their processes) and
its worker receives the state from a peer. Figures for the new node, to its worker's first step
committed at world 4: from its worker's start (the kernel's start of the process: the exec, or
the fork from the template), from the end of its `import torch`, and from its agent's start; and
the phases in between (interpreter start, the imports, the wait for its place, the process
group, which waits for the running workers to reach a commit and re-form, the state transfer,
the first step). Each run is a fresh job per start method, the methods alternating
(--methods, default spawn,default): spawn execs every worker; forkserver, and no --start_method
at all (default), which under --recovery=inprocess is the forkserver, fork every worker of the
job from a template whose `import torch` ran while the agent joined.

Usage (root, under flock /tmp/ddp-netns.lock):
  inprocess_join_bench.py BUILD_BIN [--steps 20] [--runs 3] [--methods spawn,forkserver,default]
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
WORKER = os.path.join(ROOT, "tests/integration/multinode/inprocess_worker.py")
CONF = "keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1"
from inprocess_bench import arg, first_step_of_each, steps_at  # noqa: E402
from netns_bench import (clean_up, kill_node, print_agent_logs, print_spread,  # noqa: E402
                         records, rig, wait)


def start_agent(bin_dir, out, node, method, index):
    start = [] if method == "default" else [f"--start_method={method}"]
    cmd = [os.path.join(bin_dir, "ddprun"), "--nnodes=3:4", "--nproc_per_node=1", *start,
           "--rdzv_backend=c10d", "--rdzv_endpoint=10.213.0.1:29400",
           f"--rdzv_id=join{index}_{os.getpid()}", f"--rdzv_conf={CONF}", "--max_restarts=0",
           "--recovery=inprocess", "--python", "/usr/bin/python3", WORKER, out, "--node",
           str(node)]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", PYTHONUNBUFFERED="1")
    log = open(os.path.join(out, f"agent{node}.log"), "w")
    return subprocess.Popen(["ip", "netns", "exec", f"ddpn{node}", *cmd], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


# The new worker's way in, phase by phase (inprocess_worker.py's entry phases): each from the
# previous mark to this one.
PHASES = [("forked", "started", "interpreter start"), ("started", "torch", "import torch"),
          ("torch", "elastic", "import ddprun.elastic"), ("elastic", "called", "model, optimizer"),
          ("called", "place", "channel, place"),
          ("place", "group", "init_process_group (peers reach a commit, re-form)"),
          ("group", "synced", "state transfer"), ("synced", "first", "first step")]


def phase_line(entry, first):
    marks = dict(entry["phases"], first=first["time"])
    return ", ".join(f"{name} {marks[end] - marks[begin]:.3f}" for begin, end, name in PHASES)


def one_join(bin_dir, method, steps, index):
    """(worker start, import end, agent start, kept, phases) -> the new node's first step at
    world 4, in s."""
    out = tempfile.mkdtemp(prefix="ddp-bench-join.")
    agents = {}
    try:
        for node in (1, 2, 3):
            agents[node] = start_agent(bin_dir, out, node, method, index)
        wait(lambda: first_step_of_each([r for r in steps_at(out, 3) if r["step"] >= steps - 1],
                                        range(3)), 180, f"{steps} steps at world 3")
        before = {r["pid"] for r in records(out)}
        started_at = time.time()
        agents[4] = start_agent(bin_dir, out, 4, method, index)
        first = wait(lambda: [r for r in steps_at(out, 4) if r["node"] == 4], 180,
                     "the new node's first step at world 4")[0]
        entry = [r for r in records(out) if r["node"] == 4 and r["kind"] == "entry"][0]
        kept = {r["pid"] for r in records(out) if r["node"] != 4} == before
        open(os.path.join(out, "stop"), "w").close()
        for node in (1, 2, 3, 4):
            agents[node].wait(timeout=120)
        return (first["time"] - entry["phases"]["forked"], first["time"] - entry["imported"],
                first["time"] - started_at, kept, phase_line(entry, first))
    except Exception:
        print_agent_logs(out, f"{method}: ")
        raise
    finally:
        clean_up(agents.values(), out)
        kill_node(4)


def main():
    args = sys.argv[1:]
    steps, runs = int(arg(args, "--steps", "20")), int(arg(args, "--runs", "3"))
    methods = arg(args, "--methods", "spawn,default").split(",")
    bin_dir = args[0]
    rig("down")
    rig("up", "4")
    results = {method: [] for method in methods}
    try:
        for i in range(runs):
            for method in results:
                worker, imported, agent, kept, phases = one_join(bin_dir, method, steps,
                                                                 f"{i}{method}")
                results[method].append(worker)
                print(f"run {i} {method:10s}: the new node's first step at world 4 {worker:5.2f} s "
                      f"after its worker's start, {imported:4.2f} s after its `import torch`, "
                      f"{agent:5.2f} s after its agent's start; the other workers kept their "
                      f"processes: {kept}\n  phases (s): {phases}", flush=True)
    finally:
        rig("down")
    for method, times in results.items():
        print_spread(f"{method:10s} {len(times)} joins: worker start -> first step at world 4",
                     times)


main()
