"""scancel on a running `srun ddprun` job of 2 nodes x 2 workers (signal_sources.py records every
signal and its sender):
- plain `scancel JOB`: every worker gets SIGTERM, ddprun forwards it too, and no ddprun or worker
  process is left within SLURM's KillWait (5 s in cluster-up.sh's slurm.conf);
- `scancel --signal=USR1 JOB` with `--signals_to_handle=...,SIGUSR1`: the USR1 that ddprun
  forwards reaches every worker, ddprun stops the workers and exits 128+10, nothing is left;
- workers that ignore SIGTERM, `--shutdown_timeout=2`: ddprun SIGKILLs them itself before SLURM's
  KillWait ends, so it exits 143 (not killed by SLURM) and logs every exit."""
import json
import os
import sys
import time
import uuid

import ddptest
import slurmtest
from ddptest import check

RANKS = range(4)
KILL_WAIT = 5  # KillWait in cluster-up.sh's slurm.conf


def start_job(name, tag, out_dir, ddprun_flags, worker=None):
    worker = worker or [os.path.join(slurmtest.HERE, "signal_sources.py"), out_dir]
    # Why `sh -c`: one --event_log file per node (the flag is the same for both tasks).
    events = os.path.join(out_dir, "events_$SLURM_NODEID.jsonl")
    ddprun = " ".join([ddptest.bin_path("ddprun"), "--nproc_per_node=2", "--python",
                       sys.executable, f"--event_log={events}", f"--log_dir={out_dir}/logs"] +
                      ddprun_flags + worker)
    srun = ddptest.spawn(["srun", "-N2", "--ntasks-per-node=1", "-J", name,
                          f"--export=ALL,DDP_TEST_TAG={tag}", "sh", "-c", f"exec {ddprun}"],
                         env=slurmtest.ENV, stdout=ddptest.subprocess.PIPE,
                         stderr=ddptest.subprocess.PIPE, text=True)
    slurmtest.wait_files(out_dir, [f"ready_rank{r}" for r in RANKS], timeout=30)
    return srun, slurmtest.job_id(name)


def finish(srun):
    try:
        out, err = srun.communicate(timeout=30)
    except ddptest.subprocess.TimeoutExpired:
        os.killpg(srun.pid, 9)
        out, err = srun.communicate()
    return srun.returncode, out + err


def received(out_dir):
    """{rank: [(signal name, sender pid, sender comm)]} and {rank: ready record}."""
    signals, ready = {}, {}
    for r in RANKS:
        ready[r] = json.load(open(os.path.join(out_dir, f"ready_rank{r}")))
        path = os.path.join(out_dir, f"signal_rank{r}")
        lines = open(path).read().split("\n") if os.path.exists(path) else []
        signals[r] = [tuple(line.split(" ", 2)) for line in lines if line]
    return signals, ready


def senders(signals, ready):
    """Who sent what, for the log: SLURM signals every process of the step itself, and two copies
    of one standard signal merge while pending, so either sender may be the only one recorded."""
    return "; ".join(
        f"rank {r}: " + ", ".join(
            f"{name} from {'ddprun' if int(pid) == ready[r]['ppid'] else comm}"
            for name, pid, comm in signals[r]) for r in RANKS)


def check_scancel_signal(out_dir, signal, number, scancel_flags, ddprun_flags):
    """scancel [flags] JOB: every worker gets `signal`, both agents forward it and stop their
    workers, srun exits 128+number, and no process with the job's marker is left."""
    tag = str(uuid.uuid4())
    srun, job = start_job(f"ddpsl-{number}", tag, out_dir, ddprun_flags)
    start = time.monotonic()
    slurmtest.slurm(["scancel"] + scancel_flags + [job], check_rc=0)
    gone = slurmtest.wait_gone(f"DDP_TEST_TAG={tag}", timeout=KILL_WAIT + 5)
    rc, log = finish(srun)
    signals, ready = received(out_dir)
    for r in RANKS:
        check(signals[r] and signals[r][0][0] == signal, f"rank {r} got {signals[r]}\n{log}")
    check(log.count(f"received {signal}: forwarding it to every worker") == 2,
          f"both ddprun agents must forward {signal}:\n{log}")
    check(rc == 128 + number, f"srun must exit {128 + number} (ddprun's 128+{signal}): {rc}\n{log}")
    print(f"scancel {' '.join(scancel_flags)}: every ddprun and worker gone {gone:.2f}s after "
          f"scancel ({time.monotonic() - start:.2f}s until srun exited {rc}); "
          f"{senders(signals, ready)}")


def check_scancel_term(out_dir):
    check_scancel_signal(out_dir, "SIGTERM", 15, [], [])


def check_scancel_usr1(out_dir):
    check_scancel_signal(out_dir, "SIGUSR1", 10, ["--signal=USR1"],
                         ["--signals_to_handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"])


def check_grace_before_kill_wait(out_dir):
    """Workers that ignore SIGTERM: ddprun's --shutdown_timeout=2 SIGKILLs them before SLURM's
    KillWait would SIGKILL ddprun itself, so ddprun still exits 143 and logs every exit."""
    tag = str(uuid.uuid4())
    worker = [os.path.join(slurmtest.WORKERS, "trap_term.py"), out_dir, "--ignore"]
    srun, job = start_job("ddpsl-grace", tag, out_dir, ["--shutdown_timeout=2"], worker=worker)
    start = time.monotonic()
    slurmtest.slurm(["scancel", job], check_rc=0)
    gone = slurmtest.wait_gone(f"DDP_TEST_TAG={tag}", timeout=KILL_WAIT + 5)
    rc, log = finish(srun)
    for r in RANKS:
        path = os.path.join(out_dir, f"signal_rank{r}")
        check(os.path.exists(path) and "SIGTERM" in open(path).read(),
              f"rank {r}: no SIGTERM\n{log}")
    check(rc == 143,
          f"ddprun must end its own grace (exit 143) before KillWait: srun exit {rc}\n{log}")
    exits = []
    for node in (0, 1):
        with open(os.path.join(out_dir, f"events_{node}.jsonl")) as f:
            exits += [e for e in map(json.loads, f) if e["event"] == "worker_exited"]
    check(sorted(e["rank"] for e in exits) == list(RANKS) and
          all(e.get("signal") == "SIGKILL" and e["stopped_by_agent"] == 1 for e in exits),
          f"every worker must be SIGKILLed by ddprun: {exits}\n{log}")
    print(f"scancel, workers ignoring SIGTERM, --shutdown_timeout=2: gone {gone:.2f}s after "
          f"scancel (KillWait {KILL_WAIT}s; {time.monotonic() - start:.2f}s until srun exited "
          f"{rc})")


def main():
    slurmtest.require_slurm()
    work = ddptest.temp_dir("ddpslurm_")
    try:
        with slurmtest.cluster(2):
            for part, check_part in (("term", check_scancel_term), ("usr1", check_scancel_usr1),
                                     ("grace", check_grace_before_kill_wait)):
                os.mkdir(os.path.join(work, part))
                check_part(os.path.join(work, part))
    finally:
        ddptest.remove_tree(work)
    print("OK")


if __name__ == "__main__":
    main()
