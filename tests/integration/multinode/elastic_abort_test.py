"""ddprun.elastic's NCCL abort, on a machine without a GPU (PyTorch 1.13, CPU): the decision a
worker takes when its main thread misses a new place (abort an NCCL group once where torch can,
else give the process up), and the channel thread acting on it against a scripted agent socket:
with an abort available the thread aborts first and gives up only when a second grace passes;
with gloo it gives up at once. torch 1.13 has no abort, so _nccl_abort() finds none there (the
give-up path stays the only one). scripts/gpu/inprocess_cuda.py runs the real thing on a GPU."""

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
import torch  # noqa: E402
import ddprun.elastic as elastic  # noqa: E402


def decisions():
    abort = lambda: None  # noqa: E731
    check(elastic._overdue_action("nccl", False, abort) == "abort", "nccl with an abort")
    check(elastic._overdue_action("nccl", True, abort) == "give_up", "nccl aborted already")
    check(elastic._overdue_action("nccl", False, None) == "give_up", "nccl, torch without abort")
    check(elastic._overdue_action("gloo", False, abort) == "give_up", "gloo")
    if not hasattr(torch.distributed.distributed_c10d, "_abort_process_group"):
        check(elastic._nccl_abort() is None, "torch 1.13 has no NCCL abort")
    print("ok the overdue decisions", flush=True)


def channel_run(may_abort):
    """A scripted agent hands round 1 over and nobody takes it; returns the calls seen."""
    calls = []
    done = threading.Event()
    path = os.path.join(ddptest.temp_dir(), "reform.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def give_up(round_):
        calls.append(("give_up", round_, time.monotonic()))
        done.set()

    channel = elastic._Channel(path, 0, 0.2, may_abort,
                               lambda r: calls.append(("abort", r, time.monotonic())), give_up)
    agent, _ = server.accept()
    check(agent.recv(100).startswith(b"hello 0 "), "no hello")
    started = time.monotonic()
    agent.sendall(b'place {"round": 1, "env": {"RANK": "0"}}\n')
    check(done.wait(10), f"the channel thread never gave up: {calls}")
    agent.close()
    server.close()
    check(channel.newer_than(0) is not None, "the place was not kept")
    return [(what, r, t - started) for what, r, t in calls]


def channel_thread():
    aborted = set()

    def may_abort(round_):
        return elastic._overdue_action("nccl", round_ in aborted, lambda: None) == "abort"

    calls = channel_run(lambda r: may_abort(r) and not aborted.add(r))
    check([c[:2] for c in calls] == [("abort", 1), ("give_up", 1)],
          f"nccl: expected an abort, then a give-up: {calls}")
    check(calls[1][2] - calls[0][2] >= 0.15, f"the give-up did not wait a second grace: {calls}")
    calls = channel_run(lambda r: False)
    check([c[:2] for c in calls] == [("give_up", 1)], f"gloo: expected a give-up: {calls}")
    print("ok the channel thread aborts an NCCL group once, then gives up; gloo gives up",
          flush=True)


decisions()
channel_thread()
