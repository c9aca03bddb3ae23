"""Node loss under --recovery=restart and --recovery=inprocess side by side, with real PyTorch DDP
workers (gloo) on network-namespace nodes (docs/BENCHMARKS.md).

Three nodes (scripts/netns-cluster.sh) run tests/integration/multinode/inprocess_worker.py (DDP
through ddprun.elastic: one in-memory commit per step, SLEEP seconds between steps) under c10d
--nnodes=2:3 --max_restarts=3. Once every rank has committed STEPS steps at world 3, node 3 dies
OFFSET seconds later (every process in its namespace SIGKILLed at once). The figure is seconds
from the SIGKILL to the first step committed at world 2 by the slower survivor, with the
processes the survivors started and the committed steps they trained again. A fresh job per
kill, each mode in turn for each offset, so both see the same machine.

The restart mode's workers keep no checkpoint here: they train again from step 0, which is what
a restart costs a job between checkpoints; torchrun's figures are node_loss_bench.py's.

Usage (root, under flock /tmp/ddp-netns.lock):
  inprocess_bench.py BUILD_BIN [--steps 20] [--sleep 0.05] OFFSET [OFFSET...]
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
WORKER = os.path.join(ROOT, "tests/integration/multinode/inprocess_worker.py")
CONF = "keep_alive_interval=1,keep_alive_max_attempt=2"
from netns_bench import (clean_up, compare_modes, kill_node, print_agent_logs, records,  # noqa: E402
                         wait)


def steps_at(out, world, after=0.0):
    return [r for r in records(out) if r["kind"] == "step" and r["world"] == world and
            r["time"] > after]


def first_step_of_each(steps, ranks):
    """The time by which every rank in `ranks` has committed a step in `steps`, or None."""
    firsts = {}
    for r in sorted(steps, key=lambda r: r["time"]):
        firsts.setdefault(r["rank"], r["time"])
    return max(firsts.values()) if set(firsts) >= set(ranks) else None


def one_kill(mode, bin_dir, offset, steps, pause, index):
    out = tempfile.mkdtemp(prefix="ddp-bench-inprocess.")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", PYTHONUNBUFFERED="1")
    agents = {}
    try:
        for node in (1, 2, 3):
            cmd = [os.path.join(bin_dir, "ddprun"), "--nnodes=2:3", "--nproc_per_node=1",
                   "--rdzv_backend=c10d", "--rdzv_endpoint=10.213.0.1:29400",
                   f"--rdzv_id=inproc{index}_{os.getpid()}", f"--rdzv_conf={CONF}",
                   "--max_restarts=3", f"--recovery={mode}", "--python", "/usr/bin/python3",
                   WORKER, out, "--node", str(node), "--sleep", str(pause)]
            log = open(os.path.join(out, f"agent{node}.log"), "w")
            agents[node] = subprocess.Popen(["ip", "netns", "exec", f"ddpn{node}", *cmd], env=env,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        wait(lambda: first_step_of_each([r for r in steps_at(out, 3) if r["step"] >= steps - 1],
                                        range(3)), 120, f"{steps} steps at world 3")
        time.sleep(offset)
        killed_at = time.time()
        committed = max(r["step"] for r in steps_at(out, 3))
        before = {r["pid"] for r in records(out) if r["node"] in (1, 2)}
        kill_node(3)
        done = wait(lambda: first_step_of_each(steps_at(out, 2, killed_at), range(2)), 120,
                    "a step at world 2 on both survivors")
        after = steps_at(out, 2, killed_at)
        redone = max(0, committed + 1 - min(r["step"] for r in after))
        started = len({r["pid"] for r in records(out) if r["node"] in (1, 2)} - before)
        open(os.path.join(out, "stop"), "w").close()
        for node in (1, 2):
            agents[node].wait(timeout=120)
        return done - killed_at, started, redone
    except Exception:
        print_agent_logs(out, f"{mode}: ")
        raise
    finally:
        clean_up(agents.values(), out)


def arg(args, name, default):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i:i + 2]
        return value
    return default


def main():
    args = sys.argv[1:]
    steps, pause = int(arg(args, "--steps", "20")), float(arg(args, "--sleep", "0.05"))
    bin_dir, offsets = args[0], [float(o) for o in args[1:]]
    compare_modes(offsets,
                  lambda mode, offset, index: one_kill(mode, bin_dir, offset, steps, pause, index),
                  f"step {steps}")


if __name__ == "__main__":
    main()
