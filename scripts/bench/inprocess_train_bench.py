"""Node loss under --recovery=restart and --recovery=inprocess side by side with the native path:
ddp-train workers (libddp, Gloo over the nodes' eth0) on network-namespace nodes
(docs/BENCHMARKS.md).

Three nodes (scripts/netns-cluster.sh) run ddp-train (--hidden 64 --batch_size 32, 25 ms per
step, a checkpoint every 20 steps) under c10d --nnodes=2:3 --max_restarts=3. Once the job has
printed STEPS steps at world 3, node 3 dies OFFSET seconds later (every process in its
namespace SIGKILLed at once). The figure is seconds from the SIGKILL to the first step printed
at world 2, with the processes the survivors started and the steps trained again (restart: from
the last checkpoint; inprocess: from the last in-memory commit). A fresh job per kill, each mode
in turn for each offset, so both see the same machine.

Usage (root, under flock /tmp/ddp-netns.lock):
  inprocess_train_bench.py BUILD_BIN [--steps 50] OFFSET [OFFSET...]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from netns_bench import clean_up, compare_modes, kill_node, wait  # noqa: E402

CONF = "keep_alive_interval=1,keep_alive_max_attempt=2"
PROGRESS = re.compile(r"epoch=\d+/\d+ step=(\d+)/")
# The line that says the job trains at world 2: the re-form's, or the restarted trainer's.
AT_TWO = {"inprocess": re.compile(r"reform round=\d+ .*world_size=2 .*step=(\d+)"),
          "restart": re.compile(r"training device=\S+ world_size=2 ")}
RESUMED = re.compile(r"resumed from \S+ epoch=\d+ step=(\d+)")


def read_lines(proc, lines):
    for line in proc.stdout:
        lines.append((time.time(), line.rstrip("\n")))


def one_kill(mode, bin_dir, offset, steps, index):
    out = tempfile.mkdtemp(prefix="ddp-bench-inprocess-train.")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1")
    agents, lines = {}, []
    try:
        for node in (1, 2, 3):
            cmd = [os.path.join(bin_dir, "ddprun"), "--nnodes=2:3", "--nproc_per_node=1",
                   "--rdzv_backend=c10d", "--rdzv_endpoint=10.213.0.1:29400",
                   f"--rdzv_id=inproctrain{index}_{os.getpid()}", f"--rdzv_conf={CONF}",
                   "--max_restarts=3", f"--recovery={mode}",
                   f"--event_log={os.path.join(out, f'events{node}.jsonl')}", "--no_python",
                   os.path.join(bin_dir, "ddp-train"), "--hidden", "64", "--batch_size", "32",
                   "--max_steps", "100000", "--log_every", "1", "--slow_step_ms", "25",
                   "--slow_rank", "0", "--checkpoint", os.path.join(out, "ckpt.safetensors"),
                   "--checkpoint_every", "20"]
            agents[node] = subprocess.Popen(["ip", "netns", "exec", f"ddpn{node}", *cmd], env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True, start_new_session=True)
            threading.Thread(target=read_lines, args=(agents[node], lines), daemon=True).start()
        printed = lambda: [int(m.group(1)) for _, line in list(lines)
                           if (m := PROGRESS.search(line))]
        wait(lambda: len(printed()) >= steps, 120, f"{steps} steps at world 3")
        time.sleep(offset)
        committed = max(printed())
        killed_at = time.time()
        kill_node(3)

        def first_step_at_two():
            after = [(t, line) for t, line in list(lines) if t > killed_at]
            marks = [t for t, line in after if AT_TWO[mode].search(line)]
            if not marks:
                return None
            firsts = [t for t, line in after if t > marks[0] and PROGRESS.search(line)]
            return firsts[0] if firsts else None

        done = wait(first_step_at_two, 120, "a step at world 2")
        after = [line for t, line in list(lines) if t > killed_at]
        if mode == "inprocess":
            synced = [int(m.group(1)) for line in after if (m := AT_TWO[mode].search(line))][0]
        else:
            resumed = [int(m.group(1)) for line in after if (m := RESUMED.search(line))]
            synced = resumed[0] if resumed else 0
        started = 0
        for node in (1, 2):
            with open(os.path.join(out, f"events{node}.jsonl")) as f:
                started += sum(1 for e in map(json.loads, f) if e["event"] == "workers_started")
        return done - killed_at, started - 2, max(0, committed - synced)
    except Exception:
        print("\n".join(line for _, line in lines[-40:]), file=sys.stderr)
        raise
    finally:
        clean_up(agents.values(), out)


def main():
    args = sys.argv[1:]
    steps = 50
    if "--steps" in args:
        i = args.index("--steps")
        steps = int(args[i + 1])
        del args[i:i + 2]
    bin_dir, offsets = args[0], [float(o) for o in args[1:]]
    compare_modes(offsets,
                  lambda mode, offset, index: one_kill(mode, bin_dir, offset, steps, index),
                  f"step {steps}")


main()
