"""Test worker (stdlib): records which signals reach it and who sent each one, so the tests can
tell a signal that ddprun forwarded from one that slurmstepd sent to every process of the step.

Blocks SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 and takes them with sigtimedwait
(which gives the sender's pid). Writes DIR/ready_rank<RANK> = {"pid", "ppid", "host"} once the
signals are blocked; appends "<SIGNAME> <sender pid> <sender comm>" to DIR/signal_rank<RANK> for
every signal; exits 0 LINGER seconds (default 1) after the first one, so that a second copy of the
same signal (from the other sender) is recorded too.

Usage: signal_sources.py DIR [LINGER]
"""
import json
import os
import signal
import socket
import sys
import time

out_dir = sys.argv[1]
linger = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
rank = os.environ.get("RANK", "x")
watched = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
           signal.SIGUSR2}
signal.pthread_sigmask(signal.SIG_BLOCK, watched)


def comm_of(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


ready = os.path.join(out_dir, f"ready_rank{rank}")
with open(ready + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "ppid": os.getppid(), "host": socket.gethostname()}, f)
os.replace(ready + ".tmp", ready)

deadline = None
while deadline is None or time.monotonic() < deadline:
    wait = 60.0 if deadline is None else max(0.0, deadline - time.monotonic())
    info = signal.sigtimedwait(watched, wait)
    if info is None:
        continue
    with open(os.path.join(out_dir, f"signal_rank{rank}"), "a") as f:
        f.write(f"{signal.Signals(info.si_signo).name} {info.si_pid} {comm_of(info.si_pid)}\n")
    if deadline is None:
        deadline = time.monotonic() + linger
