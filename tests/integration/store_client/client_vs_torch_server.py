"""Our client (ddp-store verbs, 1.13 dialect) against PyTorch 1.13's own TCPStore server.

The server runs in this process (TCPStore(is_master=True) serves from a C++ thread); PyTorch's
Python client on the same store checks what our client wrote and writes what it reads. PyTorch's
client puts "/" before its keys, so its "k" is "/k" on the wire.
"""

import subprocess
import sys
import threading
import time
from datetime import timedelta

import ddptest
from ddptest import check

ddptest.require_torch()
import torch.distributed as dist  # noqa: E402

DDP_STORE = ddptest.bin_path("ddp-store")


def verb(*args, timeout=5, dialect="113"):
    cmd = [DDP_STORE, args[0], "--addr", ADDR, "--dialect", dialect, "--timeout", str(timeout)]
    cmd += list(args[1:])
    return subprocess.run(cmd, capture_output=True, timeout=30)


def ok(*args, **kwargs):
    result = verb(*args, **kwargs)
    check(result.returncode == 0, f"{args}: exit {result.returncode}: {result.stderr.decode()}")
    return result.stdout


store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=10),
                      wait_for_workers=False)
ADDR = f"127.0.0.1:{store.port}"

# Values PyTorch set reach us byte for byte, binary included.
binary = bytes([0, 1, 255, 10, 0]) + b"bin"
store.set("a", binary)
check(ok("get", "/a") == binary + b"\n", "binary value set by PyTorch read back wrong")
big = bytes(range(256)) * 4096 * 4  # 4 MiB
store.set("big", big)
check(ok("get", "/big") == big + b"\n", "4 MiB value read back wrong")

# What we set, PyTorch reads.
ok("set", "/k", "v1")
check(store.get("k") == b"v1", "PyTorch did not read our set")

# add: decimal text, shared with PyTorch's add.
check(ok("add", "/cnt", "5") == b"5\n", "add 5")
check(store.add("cnt", 2) == 7, "PyTorch add after ours")
check(ok("add", "/cnt", "-10") == b"-3\n", "negative add")
check(ok("get", "/cnt") == b"-3\n", "counter stored as decimal text")

# compare_set, all four cases of the spec.
check(ok("compare-set", "/cas", "", "x") == b"x\n", "compare_set creates a missing key")
check(store.compare_set("cas", "x", "y") == b"y", "PyTorch compare_set after ours")
check(ok("compare-set", "/cas", "nope", "z") == b"y\n", "mismatch returns the current value")
check(ok("compare-set", "/missing", "exp", "w") == b"exp\n",
      "missing key with expected non-empty returns expected")
check(ok("compare-set", "/cas", "y", "z") == b"z\n", "match stores desired")

# num_keys agrees with PyTorch's; delete removes.
check(int(ok("num-keys")) == store.num_keys(), "num_keys differs from PyTorch's")
keys_before = store.num_keys()
check(ok("delete", "/k") == b"1\n", "delete of an existing key")
check(ok("delete", "/k") == b"0\n", "delete of a missing key")
check(store.num_keys() == keys_before - 1, "key still there after delete")

# wait: returns once PyTorch sets the key; times out naming the key and host:port.
threading.Timer(0.3, lambda: store.set("late", "here")).start()
start = time.monotonic()
ok("wait", "/late", "/a")
check(time.monotonic() - start >= 0.25, "wait returned before the key was set")
result = verb("wait", "/never", timeout=0.5)
check(result.returncode == 1, f"wait on a missing key: exit {result.returncode}")
check(b"wait(/never) timed out after 500ms at " + ADDR.encode() in result.stderr,
      f"timeout message: {result.stderr!r}")
# After that timed-out wait (1.13 has no CANCEL_WAIT) the server still serves everyone.
check(store.get("a") == binary, "server unhappy after a timed-out wait")

# The rest of the Store API through BlockingStore with a key prefix: multi_get and multi_set
# (one GET/SET per key in this dialect), check, add, compare_set, delete, get, num_keys.
store.set("pfx/from_peer", "hello")
keys_before = store.num_keys()
probe = subprocess.run([ddptest.bin_path("store-client-probe"), "127.0.0.1", str(store.port),
                        "113", "/pfx"], capture_output=True, text=True, timeout=30)
check(probe.returncode == 0, f"probe: exit {probe.returncode}: {probe.stderr}")
lines = dict(line.split("=", 1) for line in probe.stdout.split())
expected = {"multi_get": "1,22", "check_present": "1", "check_missing": "0", "add": "41",
            "compare_set": "33", "delete": "1", "get_from_peer": "hello"}
for name, value in expected.items():
    check(lines.get(name) == value, f"probe {name}={lines.get(name)!r}, expected {value!r}")
check(store.get("pfx/b") == b"33" and store.get("pfx/n") == b"41", "PyTorch reads probe's keys")
check(int(lines["num_keys"]) == store.num_keys() == keys_before + 2,
      f"num_keys {lines['num_keys']} vs PyTorch {store.num_keys()}")

# The 2.x dialect against a 1.13 server: refused at once with a hint, not retried until timeout.
start = time.monotonic()
result = verb("get", "/a", dialect="2", timeout=20)
check(result.returncode == 1, f"2.x client vs 1.13 server: exit {result.returncode}")
check(b"1.13 dialect" in result.stderr and ADDR.encode() in result.stderr,
      f"2.x vs 1.13 message: {result.stderr!r}")
check(time.monotonic() - start < 10, "2.x vs 1.13 retried instead of failing")

print("OK", flush=True)
