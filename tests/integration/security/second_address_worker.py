"""A worker of the multi-homed test (standard library only): reaches the workers' store through
the store host's second address (DDP_SECOND_ADDR, on a second bridge), so that its connection
comes from its own node's second address, not the one its agent joined from. SETs
/second/<RANK> and reads it back in PyTorch 1.13's wire format, writes
second_rank<RANK>.json = {"rank", "ok", "error", "port", "source"} into the folder given as its argument, then
waits for the test's go file (the store stays up while the outsider tries it)."""

import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tcpstore_wire import GET, SET, connect, read_exact, text  # noqa: E402


out_dir = sys.argv[1]
rank = int(os.environ["RANK"])
result = {"rank": rank, "ok": False, "error": "", "port": int(os.environ["MASTER_PORT"])}
try:
    with connect((os.environ["DDP_SECOND_ADDR"], int(os.environ["MASTER_PORT"])), 20) as sock:
        result["source"] = sock.getsockname()[0]
        sock.sendall(bytes([SET]) + text(f"/second/{rank}") + text("here"))
        sock.sendall(bytes([GET]) + text(f"/second/{rank}"))
        size = struct.unpack("<Q", read_exact(sock, 8))[0]
        result["ok"] = read_exact(sock, size) == b"here"
except OSError as e:
    result["error"] = f"{type(e).__name__}: {e}"
path = os.path.join(out_dir, f"second_rank{rank}.json")
with open(path + ".tmp", "w") as f:
    json.dump(result, f)
os.replace(path + ".tmp", path)
go = os.path.join(out_dir, "go")
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(0 if result["ok"] else 1)
