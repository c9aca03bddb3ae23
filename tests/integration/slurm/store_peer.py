"""Test worker (stdlib): proves that the workers of a multi-node launch reach one store and see
each other. Connects to MASTER_ADDR:MASTER_PORT in PyTorch 1.13's TCPStore wire format
(docs/protocol.md), SETs /slurm_test/host<RANK> = its hostname, ADDs 1 to /slurm_test/joined,
WAITs for every rank's key and GETs them. Writes DIR/peer_rank<RANK>.json = {"env", "host",
"peers", "joined", "pid"}.

With DDP_TEST_HOLD_FILE set, it then waits until that file exists before it exits (the job stays
up while a test probes it).

Usage: store_peer.py DIR
"""
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tcpstore_wire import ADD, GET, SET, WAIT, connect, i64, read_exact, text  # noqa: E402


out_dir = sys.argv[1]
env = dict(os.environ)
rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
host = socket.gethostname()
keys = [f"/slurm_test/host{r}" for r in range(world)]
with connect((env["MASTER_ADDR"], int(env["MASTER_PORT"])), 30) as sock:
    sock.sendall(bytes([SET]) + text(keys[rank]) + text(host))
    sock.sendall(bytes([ADD]) + text("/slurm_test/joined") + i64(1))
    joined = struct.unpack("<q", read_exact(sock, 8))[0]
    sock.sendall(bytes([WAIT]) + struct.pack("<Q", world) + b"".join(text(k) for k in keys))
    if read_exact(sock, 1) != b"\x00":
        raise RuntimeError("WAIT did not answer STOP_WAITING")
    peers = []
    for key in keys:
        sock.sendall(bytes([GET]) + text(key))
        size = struct.unpack("<Q", read_exact(sock, 8))[0]
        peers.append(read_exact(sock, size).decode())

path = os.path.join(out_dir, f"peer_rank{rank}.json")
with open(path + ".tmp", "w") as f:
    json.dump({"env": env, "host": host, "peers": peers, "joined": joined, "pid": os.getpid()}, f)
os.replace(path + ".tmp", path)
print(f"store_peer rank={rank} host={host} peers={','.join(peers)}", flush=True)
hold = env.get("DDP_TEST_HOLD_FILE")
while hold and not os.path.exists(hold):
    time.sleep(0.05)
