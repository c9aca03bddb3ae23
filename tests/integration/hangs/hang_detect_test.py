"""Hang detection (--hang_timeout) and native stacks, with real ddprun jobs:
- SIGQUIT on a native (--no_python) job gives each worker's native backtrace (eu-stack or gdb);
- ddp-train with rank 1 hung (--hang_at_step) is reported naming rank 1 and what rank 0 waits
  in, within --hang_timeout plus a few seconds, then restarted (--max_restarts=1) to exit 0;
- a worker stopped with SIGSTOP is reported as stopped and fails the job (--max_restarts=0);
- a rank that is slow on every step but progresses is never reported."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import ddptest

HERE = os.path.dirname(os.path.abspath(__file__))
SLEEPER = os.path.join(HERE, "workers", "sleeper.py")


def events_of(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def job(tmp, name, args, timeout=90):
    """Runs ddprun to its end; returns (rc, stderr, events)."""
    events = os.path.join(tmp, f"{name}.jsonl")
    result = ddptest.run([ddptest.bin_path("ddprun"), "--log_dir", os.path.join(tmp, name),
                          "--event_log", events] + args, timeout=timeout)
    return result.returncode, result.stdout + result.stderr, events_of(events)


def check_native_sigquit(tmp):
    logs = os.path.join(tmp, "native")
    proc = ddptest.spawn([ddptest.bin_path("ddprun"), "--nproc_per_node=2", "--log_dir", logs,
                          "--no_python", "sleep", "60"],
                         stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    try:
        started = ddptest.wait_until(lambda: len(glob.glob(os.path.join(logs, "*", "attempt_0",
                                                                        "*"))) == 2, 30)
        ddptest.check(started, "the native job did not start")
        time.sleep(0.5)  # let both workers exec sleep(1)
        os.kill(proc.pid, signal.SIGQUIT)
        ddptest.wait_until(lambda: glob.glob(os.path.join(logs, "*", "stacks_0.txt")), 30)
        reports = glob.glob(os.path.join(logs, "*", "stacks_0.txt"))
        ddptest.check(reports, "no native report")
        report = open(reports[0]).read()
        ddptest.check("ranks 0-1 (native):" in report and "nanosleep" in report,
                      f"native report:\n{report}")
        ddptest.check(proc.poll() is None, "SIGQUIT ended the native job")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    print("native: SIGQUIT gave both workers' native backtraces (merged); the job kept running")


def check_hung_rank_restarted(tmp):
    timeout_s = 3
    rc, log, events = job(tmp, "hung", [
        "--nproc_per_node=2", f"--hang_timeout={timeout_s}", "--max_restarts=1", "--no_python",
        ddptest.bin_path("ddp-train"), "--max_steps", "30", "--hang_at_step", "10",
        "--hang_rank", "1", "--log_every", "100"])
    ddptest.check(rc == 0, f"the restarted job must succeed, got {rc}:\n{log}")
    hangs = [e for e in events if e["event"] == "hang"]
    ddptest.check(len(hangs) == 1 and hangs[0]["ranks"] == [1], f"hang events: {hangs}\n{log}")
    summary = "hang: rank 1 made no progress while rank 0 waits in all_reduce"
    ddptest.check(summary in log and summary in hangs[0]["summary"], f"no verdict:\n{log}")
    ddptest.check("rank 1 (local_rank 1, pid" in log and "no progress for" in log, log)
    ddptest.check("hang_forever" in log, f"rank 1's stack must show where it hangs:\n{log}")
    # Detected within the timeout plus the detector's tick and scheduling (not a speed goal).
    latency_s = (hangs[0]["idle_ms"] + hangs[0]["report_ms"]) / 1000
    ddptest.check(hangs[0]["idle_ms"] < (timeout_s + 5) * 1000,
                  f"reported {hangs[0]['idle_ms']} ms after the last progress")
    restarts = [e for e in events if e["event"] == "restart"]
    ddptest.check(len(restarts) == 1 and restarts[0]["restart_spent"] == 1, f"{restarts}")
    ddptest.check(sum(e["event"] == "workers_started" for e in events) == 2, "no restart")
    print(f"hung rank: named after {hangs[0]['idle_ms']} ms without progress, report done "
          f"{latency_s:.2f} s after the hang (--hang_timeout={timeout_s}); restarted; exit 0")


def check_stopped_worker(tmp):
    out = os.path.join(tmp, "stopped_out")
    os.makedirs(out)
    logs = os.path.join(tmp, "stopped")
    events = os.path.join(tmp, "stopped.jsonl")
    proc = ddptest.spawn([ddptest.bin_path("ddprun"), "--nproc_per_node=2", "--hang_timeout=2",
                          "--shutdown_timeout=5", "--log_dir", logs, "--event_log", events,
                          "--python", sys.executable, SLEEPER, out],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = os.path.join(out, "ready_rank1")
        ddptest.check(ddptest.wait_until(lambda: os.path.exists(ready), 30), "no ready mark")
        os.kill(int(open(ready).read()), signal.SIGSTOP)
        out_text, err_text = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    log = out_text.decode() + err_text.decode()
    ddptest.check(proc.returncode == 128 + signal.SIGTERM,
                  f"a stopped worker fails the job with its stop signal, got {proc.returncode}"
                  f":\n{log}")
    ddptest.check("stopped (state T) for" in log and "hang: rank 1 stopped" in log, log)
    hangs = [e for e in events_of(events) if e["event"] == "hang"]
    ddptest.check(len(hangs) == 1 and hangs[0]["ranks"] == [1], f"{hangs}")
    print(f"stopped worker: reported as stopped after {hangs[0]['idle_ms']} ms; ddprun exited "
          f"{proc.returncode}")


def check_slow_rank_not_reported(tmp):
    rc, log, events = job(tmp, "slow", [
        "--nproc_per_node=2", "--hang_timeout=2", "--no_python", ddptest.bin_path("ddp-train"),
        "--max_steps", "6", "--slow_rank", "1", "--slow_step_ms", "1000"])
    ddptest.check(rc == 0, f"the slow job must succeed, got {rc}:\n{log}")
    ddptest.check(not any(e["event"] == "hang" for e in events) and "hang:" not in log,
                  f"a slow but progressing rank was reported:\n{log}")
    print("slow rank: 6 steps of 1 s each (6 s behind in all) under --hang_timeout=2, never "
          "reported")


def main():
    ddptest.require(shutil.which("eu-stack") or shutil.which("gdb"),
                    "neither eu-stack (apt-get install elfutils) nor gdb is installed")
    ddptest.require(os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    "Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)")
    tmp = ddptest.temp_dir("ddptest_hangs_")
    try:
        check_native_sigquit(tmp)
        check_hung_rank_restarted(tmp)
        check_stopped_worker(tmp)
        check_slow_rank_not_reported(tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
