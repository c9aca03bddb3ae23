"""The forkserver benchmark behind forkserver.sh (stdlib only): 8 PyTorch workers started by
ddprun with exec (--start_method=spawn), by ddprun's forkserver, and by torchrun 1.13, in one run.

- launch: from the command to every worker having run its first line after `import torch`
  (CLOCK_MONOTONIC, shared by every process of the machine); for the forkserver also from the
  template being ready (a preload module imported right after torch records that moment);
- restart: rank 1 exits 1 in the first attempt; from its last line (before the interpreter's
  exit, which takes hundreds of ms with torch loaded) and from ddprun reaping it (event log) to
  the new rank 1's first line, and to every new worker's first line; the reaped -> first line
  time split into the other workers' stop (event log), the new rank 0's first line and rank 1's;
- files: openat/open calls of the whole launch (strace -f), exec vs forkserver; `import torch`'s
  files are opened once per worker with exec and once per node with the forkserver.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TORCHRUN = "/usr/bin/torchrun"
TORCHRUN_ENV = {"PET_REDIRECTS": "9:1", "PET_TEE": "9:1"}
PYTHON = "/usr/bin/python3"
NPROC = 8

WORKER = r"""
import os, sys, time
import torch
first = time.monotonic()
d = sys.argv[1]
rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
open(os.path.join(d, f"first_{attempt}_{rank}"), "w").write(repr(first))
if len(sys.argv) > 2 and rank == "1" and attempt == "0":
    time.sleep(0.5)
    open(os.path.join(d, "exit"), "w").write(repr(time.monotonic()))
    sys.exit(1)
"""
READY_MARKER = "import time\nopen(__import__('os').environ['BENCH_READY_FILE'], 'w')" \
               ".write(repr(time.monotonic()))\n"


def command(kind, ddprun, script, out, extra=()):
    if kind == "torchrun":
        base = [TORCHRUN]
    else:
        base = [ddprun, "--python", PYTHON, f"--start_method={kind}"]
        if kind == "forkserver":
            base.append("--preload=torch,ddp_bench_ready")
    return base + [f"--nproc_per_node={NPROC}"] + list(extra) + [script, out]


def run(cmd, env_extra, timeout=600):
    env = dict(os.environ)
    env.update(env_extra)
    result = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, timeout=timeout)
    return result


def firsts(out, attempt):
    return [float(open(os.path.join(out, f"first_{attempt}_{r}")).read()) for r in range(NPROC)]


def launch_once(kind, ddprun, tmp, script, env):
    out = tempfile.mkdtemp(dir=tmp)
    ready_file = os.path.join(out, "ready")
    start = time.monotonic()
    result = run(command(kind, ddprun, script, out),
                 dict(env, BENCH_READY_FILE=ready_file, **(TORCHRUN_ENV if kind == "torchrun"
                                                           else {})))
    if result.returncode != 0:
        sys.exit(f"{kind} launch failed: {result.stderr[-2000:]}")
    last = max(firsts(out, 0))
    after_ready = None
    if os.path.exists(ready_file):
        after_ready = (last - float(open(ready_file).read())) * 1000
    return (last - start) * 1000, after_ready


def restart_once(kind, ddprun, tmp, script, env):
    """(last line -> new rank 1, last line -> all new, reaped exit -> new rank 1, and its parts:
    reaped -> the other workers stopped, stopped -> new rank 0's first line, rank 0's -> rank 1's
    first line) in ms."""
    out = tempfile.mkdtemp(dir=tmp)
    events = os.path.join(out, "events.jsonl")
    result = run(command(kind, ddprun, script, out, ["--max_restarts=1", "--event_log", events])
                 + ["fail"], dict(env, BENCH_READY_FILE=os.path.join(out, "ready")))
    if result.returncode != 0:
        sys.exit(f"{kind} restart run failed: {result.stderr[-2000:]}")
    exited = float(open(os.path.join(out, "exit")).read())
    parsed = [json.loads(line) for line in open(events)]
    reaped = next(e["mono_time"] for e in parsed
                  if e["event"] == "worker_exited" and e.get("exit_code") == 1)
    stopped = next(e["mono_time"] for e in parsed
                   if e["event"] == "workers_stopped" and e["mono_time"] >= reaped)
    new = firsts(out, 1)
    return ((new[1] - exited) * 1000, (max(new) - exited) * 1000, (new[1] - reaped) * 1000,
            (stopped - reaped) * 1000, (new[0] - stopped) * 1000, (new[1] - new[0]) * 1000)


def opened_files(kind, ddprun, tmp, script, env):
    out = tempfile.mkdtemp(dir=tmp)
    trace = os.path.join(out, "trace")
    cmd = ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", trace] + \
        command(kind, ddprun, script, out)
    result = run(cmd, dict(env, BENCH_READY_FILE=os.path.join(out, "ready")))
    if result.returncode != 0:
        sys.exit(f"{kind} under strace failed: {result.stderr[-2000:]}")
    calls = [line for line in open(trace) if re.search(r"\bopen(at)?\(", line)]
    torch_files = [line for line in calls if "/torch/" in line]
    return len(calls), len(torch_files)


def summary(values):
    return (f"median {statistics.median(values):7.1f} ms (min {min(values):.1f}, "
            f"max {max(values):.1f}, n={len(values)})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ddprun", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip_torchrun", action="store_true")
    args = parser.parse_args()
    kinds = ["spawn", "forkserver"]
    if not args.skip_torchrun and os.path.exists(TORCHRUN):
        kinds.append("torchrun")
    tmp = tempfile.mkdtemp(prefix="ddp_bench_forkserver_")
    try:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        with open(os.path.join(tmp, "ddp_bench_ready.py"), "w") as f:
            f.write(READY_MARKER)
        env = {"PYTHONPATH": tmp + (":" + os.environ["PYTHONPATH"]
                                    if os.environ.get("PYTHONPATH") else "")}
        print(f"forkserver benchmark on {os.cpu_count()} CPUs: {NPROC} PyTorch workers "
              f"({PYTHON}), {args.runs} runs each; 'spawn' is ddprun's exec path")
        medians = {}
        for kind in kinds:
            launches = [launch_once(kind, args.ddprun, tmp, script, env) for _ in range(args.runs)]
            medians[kind] = statistics.median(t for t, _ in launches)
            print(f"{kind:10s} launch, command -> all {NPROC} past import torch: "
                  f"{summary([t for t, _ in launches])}")
            if kind == "forkserver":
                print(f"{kind:10s} launch, template ready -> all {NPROC} past import torch: "
                      f"{summary([r for _, r in launches])}")
        for kind in kinds[1:]:
            print(f"ratio {kind} / spawn launch: {medians[kind] / medians['spawn']:.2f}")
        for kind in ("spawn", "forkserver"):
            restarts = [restart_once(kind, args.ddprun, tmp, script, env)
                        for _ in range(args.runs)]
            print(f"{kind:10s} restart, rank 1's last line -> new rank 1's first line: "
                  f"{summary([r[0] for r in restarts])}")
            print(f"{kind:10s} restart, rank 1's last line -> all {NPROC} new first lines: "
                  f"{summary([r[1] for r in restarts])}")
            print(f"{kind:10s} restart, rank 1 reaped by ddprun -> new rank 1's first line: "
                  f"{summary([r[2] for r in restarts])}")
            print(f"{kind:10s}   of which: reaped -> other workers stopped "
                  f"{summary([r[3] for r in restarts])}")
            print(f"{kind:10s}   of which: stopped -> new rank 0's first line "
                  f"{summary([r[4] for r in restarts])}")
            print(f"{kind:10s}   of which: new rank 0's -> new rank 1's first line "
                  f"{summary([r[5] for r in restarts])}")
        if shutil.which("strace"):
            for kind in ("spawn", "forkserver"):
                calls, torch_files = opened_files(kind, args.ddprun, tmp, script, env)
                print(f"{kind:10s} open/openat calls of a launch (strace -f): {calls}, "
                      f"under .../torch/: {torch_files}")
        else:
            print("strace not installed: no opened-file counts (apt-get install strace)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
