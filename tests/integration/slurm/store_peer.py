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

SET, GET, ADD, WAIT = 0, 2, 3, 5  # the 1.13 dialect's command bytes


def string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def read_exact(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("store closed the connection")
        data += chunk
    return data


out_dir = sys.argv[1]
env = dict(os.environ)
rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
host = socket.gethostname()
keys = [f"/slurm_test/host{r}" for r in range(world)]
with socket.create_connection((env["MASTER_ADDR"], int(env["MASTER_PORT"])), timeout=30) as sock:
    sock.sendall(bytes([SET]) + string(keys[rank]) + string(host))
    sock.sendall(bytes([ADD]) + string("/slurm_test/joined") + struct.pack("<q", 1))
    joined = struct.unpack("<q", read_exact(sock, 8))[0]
    sock.sendall(bytes([WAIT]) + struct.pack("<Q", world) + b"".join(string(k) for k in keys))
    if read_exact(sock, 1) != b"\x00":
        raise RuntimeError("WAIT did not answer STOP_WAITING")
    peers = []
    for key in keys:
        sock.sendall(bytes([GET]) + string(key))
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
