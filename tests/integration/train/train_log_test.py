"""ddp-train's supervisor flags under a real ddprun (docs/trainer.md): --train_log records the
run, --params_crc_every compares the ranks' parameters, --fail_on_sigusr1 fails the worker a
signal picks, and --stop_file ends an endless run cleanly.

2 ranks train with --epochs 1000000, a checkpoint every 5 steps and ddprun --max_restarts=1.
Once 12 steps are logged, rank 1's worker gets SIGUSR1: it exits 3, ddprun restarts both, and
they resume from the last checkpoint. Once 10 more steps are logged, DIR/stop is made: ddprun
exits 0 and the log says, in order: a start at step 0, steps 1, 2, ... without a gap, parameter
checks with equal CRCs, a second start at the checkpoint's step (checkpoint_step, restart_count
1), steps from there on, and an end with stopped true."""

import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ddptest  # noqa: E402
import train_common as tc  # noqa: E402


def events(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def steps_done(path):
    return [e["step"] for e in events(path) if e["event"] == "step"]


def main():
    tc.require_data()
    tmp = ddptest.temp_dir()
    log = os.path.join(tmp, "train_log.jsonl")
    stop = os.path.join(tmp, "stop")
    tag = f"DDP_TEST_TAG=train_log_{os.getpid()}"
    try:
        cmd = [ddptest.bin_path("ddprun"), "--nproc_per_node=2", "--no_python",
               "--max_restarts=1", ddptest.bin_path("ddp-train"), *tc.SMALL,
               "--batch_size", "16", "--epochs", "1000000", "--log_every", "5",
               "--checkpoint", os.path.join(tmp, "ckpt.safetensors"), "--checkpoint_every", "5",
               "--train_log", log, "--params_crc_every", "3", "--stop_file", stop,
               "--fail_on_sigusr1", "--slow_step_ms", "20"]
        env = {"OMP_NUM_THREADS": "1", tag.split("=")[0]: tag.split("=")[1]}
        with open(os.path.join(tmp, "out.txt"), "w") as out:
            proc = ddptest.spawn(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                ddptest.check(ddptest.wait_until(lambda: len(steps_done(log)) >= 12, 60),
                              f"fewer than 12 steps logged in 60 s: {events(log)[-3:]}")
                rank1 = [p for p in ddptest.processes_with_env(tag) if is_rank(p, 1)]
                ddptest.check(len(rank1) == 1, f"rank 1's worker not found: {rank1}")
                os.kill(rank1[0], signal.SIGUSR1)
                ddptest.check(ddptest.wait_until(
                    lambda: sum(e["event"] == "start" for e in events(log)) >= 2, 60),
                    "no second start after rank 1 failed")
                after = len(steps_done(log))
                ddptest.check(ddptest.wait_until(lambda: len(steps_done(log)) >= after + 10, 60),
                              "the restarted workers logged no 10 steps")
                open(stop, "w").close()
                rc = proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
        with open(os.path.join(tmp, "out.txt")) as f:
            output = f.read()
        ddptest.check(rc == 0, f"ddprun exited {rc} after the stop file:\n{output[-3000:]}")
        ddptest.check("failing on SIGUSR1" in output, f"no SIGUSR1 failure reported:\n{output}")
        check_log(events(log))
    finally:
        ddptest.remove_tree(tmp)
    print("OK")


def is_rank(pid, rank):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"ddp-train" and f"RANK={rank}".encode() in env


def check_log(log):
    kinds = [e["event"] for e in log]
    starts = [e for e in log if e["event"] == "start"]
    ddptest.check(len(starts) == 2, f"{len(starts)} start events, expected 2: {starts}")
    first, second = starts
    ddptest.check(first["step"] == 0 and first["checkpoint_step"] == -1 and
                  first["world_size"] == 2 and first["restart_count"] == 0,
                  f"the first start is not a fresh run at world 2: {first}")
    checkpoints = [e["step"] for e in log if e["event"] == "checkpoint" and e["t"] < second["t"]]
    ddptest.check(checkpoints and all(s % 5 == 0 for s in checkpoints),
                  f"checkpoints before the failure: {checkpoints}")
    ddptest.check(second["restart_count"] == 1 and second["checkpoint_step"] == checkpoints[-1]
                  and second["step"] == checkpoints[-1],
                  f"the restart did not resume from the last checkpoint {checkpoints[-1]}: {second}")
    # Steps go 1, 2, ... in each attempt; the second from the checkpoint on.
    at = kinds.index("start", 1)
    for part, begin in ((log[:at], 0), (log[at:], second["step"])):
        steps = [e["step"] for e in part if e["event"] == "step"]
        ddptest.check(steps == list(range(begin + 1, begin + 1 + len(steps))),
                      f"steps with a gap or out of order: {steps}")
    params = [e for e in log if e["event"] == "params"]
    ddptest.check(params and all(p["step"] % 3 == 0 for p in params),
                  f"parameter checks not every 3 steps: {[p['step'] for p in params]}")
    ddptest.check(all(p["crc_min"] == p["crc_max"] for p in params),
                  f"ranks with different parameters: {[p for p in params if p['crc_min'] != p['crc_max']][:3]}")
    end = log[-1]
    ddptest.check(end["event"] == "end" and end["stopped"] is True and end["world_size"] == 2,
                  f"the last event is not a stopped end: {end}")
    print(f"train log: {len(log)} events, {len(params)} parameter checks, resumed at step "
          f"{second['step']}, stopped at step {end['step']}")


if __name__ == "__main__":
    main()
