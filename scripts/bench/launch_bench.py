"""The launch benchmark behind launch.sh (stdlib only). torchrun runs as
`PET_REDIRECTS=9:1 PET_TEE=9:1 /usr/bin/torchrun` (works around its Python 3.11 parser bug
without changing what it does)."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TORCHRUN = "/usr/bin/torchrun"
TORCHRUN_ENV = {"PET_REDIRECTS": "9:1", "PET_TEE": "9:1"}

# A worker for the restart measurement: records when it started (CLOCK_MONOTONIC, shared by all
# processes of the machine); rank 1 fails once, recording when it exits.
RESTART_WORKER = r"""
import os, sys, time
d = sys.argv[1]
rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
open(os.path.join(d, f"start_{attempt}_{rank}"), "w").write(repr(time.monotonic()))
if rank == "1" and attempt == "0":
    time.sleep(0.3)
    open(os.path.join(d, "exit"), "w").write(repr(time.monotonic()))
    sys.exit(1)
time.sleep(0.6 if attempt == "0" else 0)
"""


def launcher(name, ddprun):
    if name == "ddprun":
        return [ddprun], {}
    return [TORCHRUN], TORCHRUN_ENV


def run(cmd, env_extra, timeout=120):
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def launch_teardown(name, ddprun, runs):
    base, env = launcher(name, ddprun)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = run(base + ["--nproc_per_node=8", "--no_python", "true"], env)
        times.append((time.perf_counter() - start) * 1000)
        if result.returncode != 0:
            sys.exit(f"{name} failed: {result.stderr[-2000:]}")
    return statistics.median(times), min(times), max(times)


def spawn_floor(runs):
    """The machine's process-creation floor for the same work: /bin/sh starting 8 /bin/true at once
    and waiting for them (one launcher exec plus 8 worker fork+execs, no launcher logic)."""
    script = "for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait"
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run(["/bin/sh", "-c", script], {})
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times), max(times)


def restart_latency(name, ddprun, tmp):
    base, env = launcher(name, ddprun)
    out = tempfile.mkdtemp(dir=tmp)
    script = os.path.join(tmp, "restart_worker.py")
    with open(script, "w") as f:
        f.write(RESTART_WORKER)
    extra = []
    events = os.path.join(out, "events.jsonl")
    if name == "ddprun":
        extra = ["--event_log", events]
    cmd = base + ["--nproc_per_node=4", "--max_restarts=1"] + extra + \
        ["--no_python", "/usr/bin/python3", script, out]
    result = run(cmd, env)
    if result.returncode != 0:
        sys.exit(f"{name} restart run failed: {result.stderr[-2000:]}")
    exit_time = float(open(os.path.join(out, "exit")).read())
    starts = [float(open(os.path.join(out, f"start_1_{r}")).read()) for r in range(4)]
    measured = (max(starts) - exit_time) * 1000
    from_events = None
    if name == "ddprun":
        lines = [json.loads(line) for line in open(events)]
        exited = next(e for e in lines if e["event"] == "worker_exited" and e.get("exit_code") == 1)
        started = [e for e in lines if e["event"] == "workers_started"][1]
        from_events = (started["mono_time"] - exited["mono_time"]) * 1000
    return measured, from_events


def peak_rss_kb(name, ddprun):
    base, env = launcher(name, ddprun)
    full_env = dict(os.environ)
    full_env.update(env)
    cmd = ["/usr/bin/time", "-f", "%M"] + base + ["--nproc_per_node=8", "--no_python", "sleep", "1"]
    result = subprocess.run(cmd, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, timeout=120)
    # /usr/bin/time reports the largest RSS of the agent or any one reaped child; `sleep` is far
    # smaller than either agent, so this is the agent's peak.
    return int(result.stderr.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ddprun", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--skip_torchrun", action="store_true")
    args = parser.parse_args()
    names = ["ddprun"] + ([] if args.skip_torchrun or not os.path.exists(TORCHRUN) else ["torchrun"])
    tmp = tempfile.mkdtemp(prefix="ddp_bench_launch_")
    try:
        print(f"launch benchmark on {os.cpu_count()} CPUs, {args.runs} runs each")
        median, low, high = spawn_floor(args.runs)
        print(f"{'floor':9s} /bin/sh starting 8 /bin/true and waiting:        "
              f"median {median:.1f} ms (min {low:.1f}, max {high:.1f}, n={args.runs})")
        for name in names:
            runs = args.runs if name == "ddprun" else max(3, args.runs // 4)
            median, low, high = launch_teardown(name, args.ddprun, runs)
            print(f"{name:9s} launch+teardown --nproc_per_node=8 --no_python true: "
                  f"median {median:.1f} ms (min {low:.1f}, max {high:.1f}, n={runs})")
        for name in names:
            measured, from_events = restart_latency(name, args.ddprun, tmp)
            extra = f"; event log {from_events:.1f} ms" if from_events is not None else ""
            print(f"{name:9s} restart latency (worker exit -> all 4 workers running again): "
                  f"{measured:.1f} ms{extra}")
        for name in names:
            print(f"{name:9s} agent peak RSS (8 workers): {peak_rss_kb(name, args.ddprun) / 1024:.1f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
