"""What the network-namespace benchmarks share (node_loss_bench.py, inprocess_bench.py,
inprocess_train_bench.py; scripts/gpu/inprocess_cuda.py uses wait and records): the rig of
scripts/netns-cluster.sh, a polling wait, the workers' records, and a node's death."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
RIG = os.path.join(ROOT, "scripts/netns-cluster.sh")


def rig(*args):
    subprocess.run(["bash", RIG, *args], check=True, capture_output=True, timeout=30)


def wait(predicate, timeout, what):
    """Polls predicate() every 10 ms; returns its first true value, or raises naming `what`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise RuntimeError(f"timed out waiting for {what}")


def records(out):
    """Every JSON line of the workers' record files, <out>/records_n<node>_p<pid>.jsonl (a line
    still being written is left out)."""
    result = []
    for path in glob.glob(os.path.join(out, "records_n*_p*.jsonl")):
        with open(path) as f:
            result += [json.loads(line) for line in f if line.endswith("\n")]
    return result


def kill_node(node):
    """The node dies: SIGKILL every process in its namespace at once (its agent and workers;
    torchrun's workers would outlive a SIGKILL of their agent alone)."""
    pids = subprocess.run(["ip", "netns", "pids", f"ddpn{node}"], capture_output=True,
                          text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def print_agent_logs(out, label=""):
    """The last lines of each node's agent log (<out>/agent<node>.log) on stderr."""
    for node in (1, 2, 3):
        with open(os.path.join(out, f"agent{node}.log")) as f:
            print(f"--- {label}agent on node {node} (last lines)\n" +
                  "".join(f.readlines()[-15:]), file=sys.stderr)


def clean_up(agents, out):
    """SIGKILLs every agent still running (its process group) and every process left on the
    nodes, reaps the agents, and removes `out`."""
    for p in agents:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    for node in (1, 2, 3):
        kill_node(node)
    shutil.rmtree(out, ignore_errors=True)


def print_spread(label, times):
    """One line: `label`, then the min, median and max of `times` (seconds)."""
    times = sorted(times)
    print(f"{label}: min {times[0]:.2f} s, median {times[len(times) // 2]:.2f} s, "
          f"max {times[-1]:.2f} s", flush=True)


def compare_modes(offsets, one_kill, label):
    """Runs one_kill(mode, offset, index) -> (seconds, processes started, steps redone) for
    --recovery=restart and then inprocess at every offset on a fresh 3-node rig; prints a row
    per offset, each mode's min, median and max, and the ratio of the medians."""
    rig("down")
    rig("up", "3")
    results = {"restart": [], "inprocess": []}
    try:
        for i, offset in enumerate(offsets):
            row = []
            for mode in ("restart", "inprocess"):
                seconds, started, redone = one_kill(mode, offset, f"{i}{mode}")
                results[mode].append(seconds)
                row.append(f"{mode} {seconds:5.2f} s, {started} processes started, "
                           f"{redone} steps redone")
            print(f"kill {offset:.3f} s after {label}: " + " | ".join(row), flush=True)
    finally:
        rig("down")
    for mode, times in results.items():
        print_spread(f"{mode:9s} {len(times)} kills: SIGKILL -> first step at world 2", times)
    middle = len(offsets) // 2
    print(f"median restart / inprocess: "
          f"{sorted(results['restart'])[middle] / sorted(results['inprocess'])[middle]:.1f}x",
          flush=True)
