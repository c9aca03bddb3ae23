"""issue 34, found by the soak (seed 43, etcd, --recovery=inprocess, link_long): a node's link cut
until its lease ended (3 s); the survivors' workers, blocked all that time in a gloo collective
with the cut node, then waited a further grace (1 s) for their new place before they gave up
their processes. The main thread shows progress at least every grace (grace is longer than a
step), so a place is now due a grace after the main thread's last commit, or at its arrival if
later: a thread blocked for longer than the grace is given up at once.

Against a scripted agent socket, the channel thread of ddprun.elastic with a grace of 30 s:
- the main thread's last commit 60 s ago (blocked): the place is given up within 10 s;
- the main thread committing every 50 ms: the place is not given up within 2 s (it is taken at
  the next commit in a real worker; here nobody takes it, and the grace is 30 s);
- the main thread waiting for its place (its last commit 60 s ago, before the collective that
  failed): it takes the place, which is not given up."""

import os
import socket
import sys
import threading
import time

import ddptest
from ddptest import check

if sys.executable != ddptest.TORCH_PYTHON:
    ddptest.require_torch()
    os.execv(ddptest.TORCH_PYTHON, [ddptest.TORCH_PYTHON, *sys.argv])

sys.path.insert(0, os.path.join(ddptest.SOURCE_DIR, "python"))
import ddprun.elastic as elastic  # noqa: E402

GRACE_S = 30.0


def hand_over(blocked_s, committing, wait_s, waiting=False, forming=False):
    """A channel whose main thread last committed `blocked_s` ago (and, with `committing`, keeps
    committing; with `waiting`, waits for the place; with `forming`, has not committed since it
    took its place `blocked_s` ago: it waits in its group's init); the agent hands round 1 over.
    Returns whether the place was given up within `wait_s`."""
    given_up = threading.Event()
    path = os.path.join(ddptest.temp_dir(), "reform.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    channel = elastic._Channel(path, 0, GRACE_S, lambda r: False, lambda r: None,
                               lambda r: given_up.set())
    agent, _ = server.accept()
    check(agent.recv(100).startswith(b"hello 0 "), "no hello")
    if not forming:
        channel.progressed()  # it trains (a process forms its group until its first commit)
    channel._progress = time.monotonic() - blocked_s  # (a main thread blocked since then)
    stop = threading.Event()

    def commit_loop():
        while not stop.wait(0.05):
            channel.progressed()

    if committing:
        threading.Thread(target=commit_loop, daemon=True).start()
    taken = []
    if waiting:
        waiter = threading.Thread(target=lambda: taken.append(channel.wait_newer_than(0)),
                                  daemon=True)
        waiter.start()
        check(ddptest.wait_until(lambda: channel._waiting, 10), "the main thread never waited")
    agent.sendall(b'place {"round": 1, "env": {"RANK": "0"}}\n')
    result = given_up.wait(wait_s)
    if waiting:
        waiter.join(10)
        check(taken and taken[0]["round"] == 1, "the waiting main thread did not take its place")
    stop.set()
    agent.close()
    server.close()
    return result


check(hand_over(60.0, False, 10.0),
      f"a main thread blocked for 60 s (grace {GRACE_S} s): the place was not given up at once")
print("ok a main thread blocked past the grace is given up when the place arrives", flush=True)
check(not hand_over(0.0, True, 2.0),
      "a main thread committing every 50 ms: the place was given up before the grace")
print("ok a main thread that commits gets the grace", flush=True)
check(not hand_over(60.0, False, 2.0, waiting=True),
      "a main thread waiting for its place: the place was given up")
print("ok a main thread waiting for its place takes it", flush=True)
# The etcd soak's seed 31 (etcd_soak_seed31_worker_kill_then_node_kill): a survivor that took its
# place and waits in its group's init for a newcomer is not blocked in a step.
check(not hand_over(60.0, False, 2.0, forming=True),
      "a main thread forming its group since it took its place: the place was given up")
print("ok a main thread forming its group gets the grace", flush=True)
