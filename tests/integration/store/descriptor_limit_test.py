"""`ddp-store serve` at its descriptor limit (RLIMIT_NOFILE 64, hard): 200 connection attempts
over a second are refused without a busy log, one line when refusing starts and one when it
accepts again; the connections it holds stay served, and once some close PyTorch 1.13's client is
served again."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import ddptest  # noqa: E402
import store_servers  # noqa: E402
from ddptest import check  # noqa: E402

TORCH_CLIENT = """
import datetime, sys
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", int(sys.argv[1]), None, False, datetime.timedelta(seconds=30))
store.set("k", "v")
print("torch client served", store.get("k").decode(), flush=True)
"""


def num_keys(sock):
    """GETNUMKEYS; None when the server closed the connection."""
    data = b""
    try:
        sock.sendall(b"\x06")
        while len(data) < 8:
            chunk = sock.recv(8 - len(data))
            if not chunk:
                return None
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return None
    return int.from_bytes(data, "little")


def main():
    ddptest.require_torch()
    store = ddptest.bin_path("ddp-store")
    cmd = ["bash", "-c", f'ulimit -n 64 && exec "{store}" serve --host 127.0.0.1 --port 0']
    with store_servers.Server(cmd) as server:
        held = []
        for _ in range(200):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            if num_keys(sock) is None:
                sock.close()  # refused: accepted and closed at once
            else:
                held.append(sock)
            time.sleep(0.005)
        check(45 <= len(held) < 64, f"{len(held)} of 200 connections served under a limit of 64")
        check(all(num_keys(s) == 0 for s in held), "a held connection stopped being served")
        for sock in held[:10]:
            sock.close()
        time.sleep(0.2)
        out = ddptest.run([ddptest.TORCH_PYTHON, "-c", TORCH_CLIENT, str(server.port)],
                          timeout=60, check_rc=0)
        check("torch client served v" in out.stdout, out.stdout)
        rc, err = server.stop()
    check(rc == 0, f"ddp-store exited {rc}\n{err}")
    refusing = [line for line in err.splitlines() if "refuses new connections" in line]
    again = [line for line in err.splitlines() if "accepts connections again" in line]
    check(len(refusing) == 1 and "Too many open files" in refusing[0],
          f"expected one line when refusing started, got {len(refusing)}:\n{err}")
    check(len(again) == 1, f"expected one line when accepting resumed, got {len(again)}:\n{err}")
    print(f"ok at the descriptor limit: {200 - len(held)} refused, 2 log lines; {again[0]}")


main()
