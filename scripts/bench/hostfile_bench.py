#!/usr/bin/env python3
"""hostfile_bench.py - `ddprun --hostfile` against a bash ssh loop (docs/BENCHMARKS.md).

    flock /tmp/ddprun-netns.lock python3 scripts/bench/hostfile_bench.py [--runs R] N [N...]

For each N: N network-namespace nodes (scripts/netns-cluster.sh), each with a real sshd
(tests/integration/hostfile/ssh_rig.py: generated keys and configs, nothing of the machine's ssh
setup used). One job, one worker per host (ddp-bench-stamp, which writes its start time), is
started R times each way:

  hostfile  ddprun --ssh "ssh -F cfg" --hostfile FILE ddp-bench-stamp DIR
  bash      bash -c 'for each host: ssh -F cfg host "cd DIR && exec ddprun --nnodes=N
            --node_rank=i --master_addr=<first> ddp-bench-stamp DIR" & done; wait'

The figure: seconds from starting the command to the last worker's start (its own stamp), the
median and range over R runs. A third row, the floor: seconds for N concurrent `ssh -F cfg host
true` to return (what the connections alone cost). Needs root. Env: BUILD (default build).
"""

import argparse
import glob
import os
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests/integration"))
sys.path.insert(0, os.path.join(ROOT, "tests/integration/hostfile"))
BIN = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")) + "/bin")
os.environ.setdefault("DDP_BIN_DIR", BIN)
os.environ.setdefault("DDP_SOURCE_DIR", ROOT)

import ssh_rig  # noqa: E402
from netns_rig import addr  # noqa: E402

DDPRUN = os.path.join(BIN, "ddprun")
STAMP = os.path.join(BIN, "ddp-bench-stamp")


def last_start(out_dir, n, started, what):
    deadline = time.monotonic() + 60
    while True:
        files = glob.glob(os.path.join(out_dir, f"world{n}_rank*"))
        if len(files) == n and all(os.path.getsize(f) > 0 for f in files):
            return max(float(open(f).read()) for f in files) - started
        if time.monotonic() > deadline:
            sys.exit(f"{what}: {len(files)} of {n} workers started within 60 s")
        time.sleep(0.01)


def run_once(cmd, out_dir, n, what):
    for f in glob.glob(os.path.join(out_dir, "*")):
        os.remove(f)
    started = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    figure = last_start(out_dir, n, started, what)
    _, err = p.communicate(timeout=60)
    if p.returncode != 0:
        sys.exit(f"{what}: exit {p.returncode}\n{err}")
    return figure


def bash_loop(cluster, n, out_dir):
    lines = []
    for i in range(n):
        remote = " ".join(shlex.quote(w) for w in [
            DDPRUN, f"--nnodes={n}", f"--node_rank={i}", f"--master_addr={addr(1)}", STAMP,
            out_dir])
        remote = f"cd {shlex.quote(os.getcwd())} && exec {remote}"
        lines.append(f"{cluster.ssh_command()} {addr(i + 1)} {shlex.quote(remote)} &")
    return ["bash", "-c", "\n".join(lines + ["wait"])]


def ssh_floor(cluster, n):
    started = time.time()
    procs = [subprocess.Popen([*cluster.ssh_command().split(), addr(i + 1), "true"])
             for i in range(n)]
    if any(p.wait(timeout=60) != 0 for p in procs):
        sys.exit("ssh floor: an ssh failed")
    return time.time() - started


def summary(values):
    return (f"median {statistics.median(values):.3f} s "
            f"(min {min(values):.3f}, max {max(values):.3f}, {len(values)} runs)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("nodes", type=int, nargs="+")
    args = parser.parse_args()
    ssh_rig.require_ssh()
    for n in args.nodes:
        out_dir = os.path.abspath(f"/tmp/ddp-bench-hostfile-{os.getpid()}")
        os.makedirs(out_dir, exist_ok=True)
        try:
            with ssh_rig.SshCluster(n) as c:
                hosts = c.hostfile([addr(i + 1) for i in range(n)])
                fanout = [DDPRUN, "--ssh", c.ssh_command(), "--hostfile", hosts, STAMP, out_dir]
                loop = bash_loop(c, n, out_dir)
                results = {"hostfile": [], "bash": [], "ssh true": []}
                for _ in range(args.runs):  # interleaved, so load changes hit both alike
                    results["hostfile"].append(run_once(fanout, out_dir, n, "hostfile"))
                    results["bash"].append(run_once(loop, out_dir, n, "bash loop"))
                    results["ssh true"].append(ssh_floor(c, n))
                for name, values in results.items():
                    what = ("start -> every ssh returned" if name == "ssh true"
                            else "start -> last worker running")
                    print(f"hosts={n} {name:8s} {what}: {summary(values)}", flush=True)
        finally:
            subprocess.run(["rm", "-rf", out_dir])


main()
