"""Our client (ddp-store verbs) against `ddp-store serve`, in both dialects and across them.

Also: bad --addr values exit 2 naming the flag; an unreachable store exits 1 naming host:port.
"""

import signal
import subprocess
import time

import ddptest
from ddptest import check

DDP_STORE = ddptest.bin_path("ddp-store")


def verb(name, *args, dialect="2", timeout=5, addr=None):
    cmd = [DDP_STORE, name, "--addr", addr or ADDR, "--dialect", dialect, "--timeout", str(timeout)]
    return subprocess.run(cmd + list(args), capture_output=True, timeout=30)


def ok(name, *args, **kwargs):
    result = verb(name, *args, **kwargs)
    check(result.returncode == 0, f"{name} {args}: exit {result.returncode}: {result.stderr!r}")
    return result.stdout


server = ddptest.spawn([DDP_STORE, "serve", "--host", "127.0.0.1", "--port", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    line = server.stdout.readline().strip()
    check(line.startswith("listening on 127.0.0.1:"), f"serve printed {line!r}")
    ADDR = line.split()[-1]

    for dialect in ("2", "113"):
        key = f"/d{dialect}"
        ok("set", key, "v", dialect=dialect)
        check(ok("get", key, dialect=dialect) == b"v\n", f"get in dialect {dialect}")
        check(ok("add", key + "/n", "4", dialect=dialect) == b"4\n", f"add in dialect {dialect}")
        check(ok("compare-set", key, "v", "w", dialect=dialect) == b"w\n",
              f"compare-set in dialect {dialect}")
        check(ok("delete", key + "/n", dialect=dialect) == b"1\n", f"delete in dialect {dialect}")

    # One store, two dialects: what a 2.x client wrote, a 1.13 client reads.
    check(ok("get", "/d2", dialect="113") == b"w\n", "cross-dialect read")
    check(int(ok("num-keys", dialect="113")) == int(ok("num-keys", dialect="2")) == 2,
          "num-keys in both dialects")

    # The rest of the Store API through BlockingStore, in both dialects (append in 2.x only).
    for dialect in ("2", "113"):
        prefix = f"/p{dialect}"
        ok("set", prefix + "/from_peer", "hi", dialect="113")
        probe = subprocess.run([ddptest.bin_path("store-client-probe"), "127.0.0.1",
                                ADDR.split(":")[1], dialect, prefix],
                               capture_output=True, text=True, timeout=30)
        check(probe.returncode == 0, f"probe {dialect}: exit {probe.returncode}: {probe.stderr}")
        lines = dict(line.split("=", 1) for line in probe.stdout.split())
        expected = {"multi_get": "1,22", "check_present": "1", "check_missing": "0", "add": "41",
                    "compare_set": "33", "delete": "1", "get_from_peer": "hi"}
        if dialect == "2":
            expected["append"] = "33x"
        for name, value in expected.items():
            check(lines.get(name) == value,
                  f"probe {dialect} {name}={lines.get(name)!r}, expected {value!r}")
        written = expected.get("append", "33").encode()
        check(ok("get", prefix + "/b", dialect="113").strip() == written,
              "verb reads what the probe wrote")

    # A 2.x wait that times out cancels with CANCEL_WAIT; a 1.13 one closes its connection.
    for dialect in ("2", "113"):
        result = verb("wait", "/never", dialect=dialect, timeout=0.3)
        check(result.returncode == 1, f"wait timeout in dialect {dialect}: {result.returncode}")
        check(f"store wait(/never) timed out after 300ms at {ADDR}".encode() in result.stderr,
              f"timeout message: {result.stderr!r}")

    # A waiter is released when another client sets the key.
    waiter = subprocess.Popen([DDP_STORE, "wait", "--addr", ADDR, "--timeout", "20", "/late"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.2)
    check(waiter.poll() is None, "wait returned before the key existed")
    ok("set", "/late", "x", dialect="113")
    check(waiter.wait(timeout=10) == 0, "wait not released by a set from the other dialect")

    # Bad input names the flag; an unreachable store names host:port.
    for bad in ("nonsense", "host:", "host:99999", ":1"):
        result = verb("get", "/k", addr=bad)
        check(result.returncode == 2, f"--addr {bad}: exit {result.returncode}")
        check(b"--addr" in result.stderr and len(result.stderr.splitlines()) == 1,
              f"--addr {bad}: {result.stderr!r}")
    port = ddptest.free_port()
    result = verb("get", "/k", addr=f"127.0.0.1:{port}", timeout=0.3)
    check(result.returncode == 1, f"unreachable store: exit {result.returncode}")
    check(f"store at 127.0.0.1:{port} unreachable after 300ms".encode() in result.stderr,
          f"unreachable message: {result.stderr!r}")
finally:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()

print("OK", flush=True)
