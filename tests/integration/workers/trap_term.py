"""Test worker: records the signals it receives. Writes DIR/ready_rank<RANK> once its handlers are
installed, then sleeps; on SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1 writes DIR/signal_rank<RANK>
(the signal's name) and exits 0, unless --ignore, in which case it keeps sleeping (the agent
must SIGKILL it after the grace period).

Usage: trap_term.py DIR [--ignore]
"""
import os
import signal
import sys
import time

out_dir = sys.argv[1]
ignore = "--ignore" in sys.argv[2:]
rank = os.environ.get("RANK", "x")


def on_signal(signum, _frame):
    with open(os.path.join(out_dir, f"signal_rank{rank}"), "a") as f:
        f.write(signal.Signals(signum).name + "\n")
    if not ignore:
        sys.exit(0)


for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
    signal.signal(sig, on_signal)
with open(os.path.join(out_dir, f"ready_rank{rank}"), "w") as f:
    f.write(str(os.getpid()))
while True:
    time.sleep(60)
