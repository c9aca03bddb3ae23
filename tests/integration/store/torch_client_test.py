"""PyTorch 1.13's own TCPStore client against `ddp-store serve`: every operation it has gives the
same outcomes as against PyTorch's own server (run side by side), plus what only ours gets right."""

import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import ddptest  # noqa: E402
import store_servers  # noqa: E402

OPS = os.path.join(os.path.dirname(__file__), "torch_store_ops.py")


def start_ops(server):
    return ddptest.spawn([ddptest.TORCH_PYTHON, OPS, server.host, str(server.port)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_ops(proc, server):
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        ddptest.fail(f"torch_store_ops.py against port {server.port} hung")
    ddptest.check(proc.returncode == 0,
                  f"torch_store_ops.py against port {server.port} failed:\n{err}")
    return json.loads(out)


ONLY_OURS = r"""
import datetime, sys, threading
from torch.distributed import TCPStore
host, port = sys.argv[1], int(sys.argv[2])
s = TCPStore(host, port, None, False, datetime.timedelta(seconds=10))
before = s.num_keys()
try:
    s.wait(["/late"], datetime.timedelta(seconds=0.3))
except RuntimeError:
    pass
first = s.add("after", 7)
other = TCPStore(host, port, None, False, datetime.timedelta(seconds=10))
other.set("/late", "x")
other.get("/late")  # a SET has no reply: this read on the same connection says it was applied
# 1.13's own server would now push a stray STOP_WAITING into s's socket and the next reply would be
# misread; ours dropped the abandoned wait when s sent its next request (the add).
print(first, s.num_keys() - before, s.compare_set("c", "", "made").decode())
# A key created by compare_set wakes a blocked get (1.13's server never wakes it).
threading.Timer(0.2, lambda: other.compare_set("cas", "", "v")).start()
print(s.get("cas").decode())
"""


def main():
    ddptest.require_torch()
    with store_servers.torch_store() as reference, store_servers.ddp_store() as ours:
        ours_run, reference_run = start_ops(ours), start_ops(reference)
        got, expected = finish_ops(ours_run, ours), finish_ops(reference_run, reference)
        reference.proc.stdin.close()
        for key in sorted(set(expected) | set(got)):
            ddptest.check(got.get(key) == expected.get(key),
                          f"{key}: ddp-store gave {got.get(key)!r}, PyTorch's server "
                          f"{expected.get(key)!r}")
        # The reference outcomes themselves, so that a shared mistake cannot pass.
        ddptest.check(got["add"] == [5, 3, 3] and got["add_text"] == "3", f"add: {got}")
        ddptest.check(got["cas_missing"] == "exp" and got["cas_create"] == "x", f"cas: {got}")
        ddptest.check(got["shared_counter"] == "400", f"counter: {got}")
        ddptest.check(got["wait_timeout"] == "Socket Timeout" and got["wait_timeout_waited"],
                      f"wait timeout: {got}")
        ddptest.check(got["big_len"] == 4 << 20 and got["big_intact"], "4 MiB value")

        result = ddptest.run([ddptest.TORCH_PYTHON, "-c", ONLY_OURS, ours.host, str(ours.port)],
                             timeout=30, check_rc=0)
        # Keys added: "/late" and "after" ("c" comes after num_keys).
        ddptest.check(result.stdout.split() == ["7", "2", "made", "v"],
                      f"abandoned wait / compare_set wake-up: {result.stdout!r}")
        code, err = ours.stop()
        ddptest.check(code == 0, f"ddp-store serve exited {code} on SIGTERM: {err}")
    print("ok")


if __name__ == "__main__":
    main()
