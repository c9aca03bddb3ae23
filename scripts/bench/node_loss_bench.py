"""Node-loss recovery with real PyTorch DDP workers on network-namespace nodes (docs/BENCHMARKS.md).

Three nodes (scripts/netns-cluster.sh) run tests/integration/multinode/torch_elastic_worker.py
(gloo DDP that checkpoints every epoch and resumes) under --nnodes=2:3 --max_restarts=3
--rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=2. At each OFFSET seconds after an
epoch's barrier node 3 (not the store host) dies: every process in its namespace, its agent and
its worker, is SIGKILLed at once (torchrun's workers would outlive their agent alone; ddprun's die
with it). The figure is seconds from the SIGKILL to the moment the last survivor's new worker is
past init_process_group. A fresh job
per kill. ddprun figures come with a breakdown from the survivors' --event_log.

Usage (root, under flock /tmp/ddprun-netns.lock):
  node_loss_bench.py ddprun|torchrun BUILD_BIN OFFSET [OFFSET...]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
WORKER = os.path.join(ROOT, "tests/integration/multinode/torch_elastic_worker.py")
TORCHRUN = os.path.abspath(os.path.join(ROOT, "../../shared/tools/torchrun-fixed"))
if not os.path.exists(TORCHRUN):
    TORCHRUN = "/work/shared/tools/torchrun-fixed"
CONF = "keep_alive_interval=1,keep_alive_max_attempt=2"
sys.path.insert(0, os.path.join(ROOT, "tests/integration/multinode"))
from torch_elastic_records import latest_barrier, starts  # noqa: E402
from netns_bench import clean_up, kill_node, print_agent_logs, rig, wait  # noqa: E402


def command(launcher, bin_dir, out, node, run_id):
    common = ["--nnodes=2:3", "--nproc_per_node=1", "--rdzv_backend=c10d",
              "--rdzv_endpoint=10.213.0.1:29400", f"--rdzv_id={run_id}", f"--rdzv_conf={CONF}",
              "--max_restarts=3"]
    if launcher == "ddprun":
        return [os.path.join(bin_dir, "ddprun"), *common, f"--event_log={out}/events{node}.jsonl",
                "--python", "/usr/bin/python3", WORKER, out]
    # torchrun 1.13 decides whether it hosts the store by the machine's host name and its
    # addresses, which in a namespace node resolve to 127.0.0.1: node 1 is told explicitly.
    common[5] += f",is_host={1 if node == 1 else 0}"
    # Its workers reach the store at the host agent's host name (MASTER_ADDR): each node gets a
    # name of its own (a UTS namespace) that /etc/netns/ddpn<i>/hosts resolves (hosts_files()).
    return ["unshare", "--uts", "sh", "-c", f'hostname ddpn{node} && exec "$@"', "sh",
            "/usr/bin/python3", TORCHRUN, *common, WORKER, out]


class hosts_files:
    """/etc/netns/ddpn<i>/hosts naming the three nodes (ip netns exec bind-mounts it over
    /etc/hosts inside node i only); removed on exit."""

    def __enter__(self):
        self.made = []
        text = "127.0.0.1 localhost\n" + "".join(f"10.213.0.{i} ddpn{i}\n" for i in (1, 2, 3))
        for i in (1, 2, 3):
            folder = f"/etc/netns/ddpn{i}"
            if os.path.exists(os.path.join(folder, "hosts")):
                continue
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "hosts"), "w") as f:
                f.write(text)
            self.made.append(folder)
        return self

    def __exit__(self, *exc):
        for folder in self.made:
            os.remove(os.path.join(folder, "hosts"))
            os.rmdir(folder)
        return False


def breakdown(out, killed_at):
    """ddprun: when the survivors' workers failed, the restart, the round and the new workers."""
    marks = {}
    for node in (1, 2):
        path = os.path.join(out, f"events{node}.jsonl")
        for line in open(path):
            e = json.loads(line)
            if e["wall_time"] <= killed_at:
                continue
            key = {"worker_exited": "worker failed", "node_lost": "node_lost",
                   "restart": "restart", "rendezvous": "round closed",
                   "workers_started": "workers started"}.get(e["event"])
            if key and key not in marks.get(node, {}):
                marks.setdefault(node, {})[key] = e["wall_time"] - killed_at
            if e["event"] == "node_lost":
                marks[node]["detected_by"] = e["detected_by"]
    return marks


def one_kill(launcher, bin_dir, offset, index):
    out = tempfile.mkdtemp(prefix="ddp-bench-loss.")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", PYTHONUNBUFFERED="1")
    agents = {}
    try:
        run_id = f"loss{index}_{os.getpid()}"
        for node in (1, 2, 3):
            log = open(os.path.join(out, f"agent{node}.log"), "w")
            agents[node] = subprocess.Popen(
                ["ip", "netns", "exec", f"ddpn{node}", *command(launcher, bin_dir, out, node,
                                                                run_id)],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait(lambda: len(starts(out, 3, 0)) >= 3, 60, "three workers")
        since = max(s["init_time"] for s in starts(out, 3, 0))
        barrier = wait(lambda: latest_barrier(out, 3, since), 60, "an epoch barrier")
        time.sleep(max(0.0, barrier + offset - time.time()))
        killed_at = time.time()
        kill_node(3)
        survivors = wait(lambda: len(starts(out, 2, killed_at)) >= 2 and starts(out, 2, killed_at),
                         120, "both survivors' new workers")
        recovery = max(s["init_time"] for s in survivors) - killed_at
        spent = max(s["restart_count"] for s in survivors)
        line = (f"{launcher:8s} kill {offset:.1f} s after a barrier: SIGKILL -> survivors past "
                f"init_process_group {recovery:5.2f} s, restarts spent {spent}")
        if launcher == "ddprun":
            marks = breakdown(out, killed_at)
            first = marks.get(1, {})
            line += "  (node 1: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in first.items()) + ")"
        print(line, flush=True)
        open(os.path.join(out, "stop"), "w").close()
        for node in (1, 2):
            agents[node].wait(timeout=120)
        return recovery, spent
    except Exception:
        print_agent_logs(out, "")
        raise
    finally:
        clean_up(agents.values(), out)


def main():
    launcher, bin_dir, offsets = sys.argv[1], sys.argv[2], [float(o) for o in sys.argv[3:]]
    rig("down")
    rig("up", "3")
    try:
        with hosts_files():
            results = [one_kill(launcher, bin_dir, offset, i) for i, offset in enumerate(offsets)]
    finally:
        rig("down")
    times = sorted(r for r, _ in results)
    print(f"{launcher:8s} {len(times)} kills: recovery min {times[0]:.2f} s, median "
          f"{times[len(times) // 2]:.2f} s, max {times[-1]:.2f} s; restarts spent "
          f"{[s for _, s in results]}", flush=True)


main()
