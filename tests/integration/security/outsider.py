"""The outsider of the security tests: run in a network namespace that holds no node of the
job, it tries each attack on the job's stores with raw TCPStore bytes (standard library only)
and prints one JSON object: attack -> "refused" or what the store answered.

  outsider.py RDZV_HOST RDZV_PORT WORKER_HOST WORKER_PORT RUN_ID CAPTURED_HEX|- FLOOD

An attack counts as refused when the store closes the connection without answering (a request
is never served) or answers the handshake with its refusal byte (03)."""

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tcpstore_wire import (DELETE_KEY, GET, GETNUMKEYS, HELLO, SET, connect,  # noqa: E402
                           read_some, text)

rdzv = (sys.argv[1], int(sys.argv[2]))
worker = (sys.argv[3], int(sys.argv[4]))
run_id = sys.argv[5]
captured = bytes.fromhex(sys.argv[6]) if sys.argv[6] != "-" else b""
flood = int(sys.argv[7])


def answer(s, n):
    """Up to n reply bytes; b"" when the store closed (or reset) the connection first."""
    try:
        return read_some(s, n, timeout_is_error=True)
    except socket.timeout:
        return b"TIMEOUT"


def served(address, request):
    """Sends a 1.13 request and then GETNUMKEYS: any reply means the store served the stranger."""
    try:
        s = connect(address)
    except OSError as e:
        return "refused" if isinstance(e, ConnectionRefusedError) else f"error {e}"
    try:
        s.sendall(request + bytes([GETNUMKEYS]))
    except OSError:
        return "refused"
    reply = answer(s, 8)
    s.close()
    return "refused" if reply == b"" else f"ANSWERED {reply.hex()}"


def replay(address):
    s = connect(address)
    s.sendall(HELLO)
    challenge = answer(s, 33)
    if len(challenge) != 33 or challenge[0] != 1:
        return f"no challenge: {challenge.hex()}"
    s.sendall(captured)
    verdict = answer(s, 5)  # 02 + the PING's echo if the replay were accepted
    s.close()
    return "refused" if verdict in (b"", b"\x03") else f"ANSWERED {verdict.hex()}"


def flood_all(addresses):
    """Opens `flood` silent connections to each store; refused when the stores close them all."""
    sockets = []
    for address in addresses:
        for _ in range(flood):
            try:
                sockets.append(connect(address))
            except OSError:
                pass
    deadline = time.monotonic() + 20
    open_left = list(sockets)
    while open_left and time.monotonic() < deadline:
        still = []
        for s in open_left:
            s.settimeout(0.01)
            try:
                if s.recv(1) == b"":
                    s.close()
                    continue
            except socket.timeout:
                still.append(s)
                continue
            except OSError:
                s.close()
                continue
            still.append(s)
        open_left = still
        time.sleep(0.2)
    for s in open_left:
        s.close()
    return "refused" if not open_left else f"{len(open_left)} of {len(sockets)} still open"


prefix = f"/ddprun/{run_id}"
results = {}
if flood:
    # Held while the other attacks run: the job keeps going meanwhile.
    import threading
    flood_result = {}
    flooder = threading.Thread(target=lambda: flood_result.update(
        flood=flood_all([rdzv, worker] if rdzv[1] else [worker])))
    flooder.start()
if rdzv[1]:
    results["forged_close"] = served(rdzv, bytes([SET]) + text(f"{prefix}/closed") +
                                     text("failed"))
    results["take_rank"] = served(rdzv, bytes([SET]) + text(f"{prefix}/r0/place/1") + text("9"))
    results["read_keys"] = served(rdzv, bytes([GET]) + text(f"{prefix}/latest"))
    results["delete"] = served(rdzv, bytes([DELETE_KEY]) + text(f"{prefix}/latest"))
    if captured:
        results["replay"] = replay(rdzv)
results["worker_key_set"] = served(worker, bytes([SET]) + text("/probe") + text("evil"))
results["worker_key_read"] = served(worker, bytes([GET]) + text("/probe"))
if flood:
    flooder.join()
    results.update(flood_result)
print(json.dumps(results))
