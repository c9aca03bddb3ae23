"""Misbehaving store clients next to a probe (issue 15): each case abuses a running TCPStore server
(ddp-store or PyTorch 1.13's own) over raw 1.13-dialect sockets while a probe process sends
GETNUMKEYS every 10 ms, and reports the probe's worst wait and p99 and the server's RSS.
Used by store_abuse_test.py (which asserts behaviour) and scripts/bench/store.sh abuse (which
prints the table).

    store_abuse.py probe HOST PORT          the probe: until stdin closes, then JSON on stdout
    store_abuse.py run HOST PORT PID CASE.. each case's result as one JSON line
"""

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

MIB = 1 << 20
# 1.13 numbering (2.0-era APPEND and MULTI_GET above 8; PyTorch 1.13's own server lacks them).
SET, GET, NUM_KEYS, WATCH_KEY, DELETE_KEY, APPEND, MULTI_GET = 0, 2, 6, 7, 8, 9, 10


def string(data):
    if isinstance(data, str):
        data = data.encode()
    return struct.pack("<Q", len(data)) + data


def connect(host, port):
    sock = socket.create_connection((host, port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 4 * MIB))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def send_value(sock, command, key, size, fill=b"x"):
    """A SET or APPEND of `size` bytes, sent in 4 MiB pieces (no 2nd copy of a large value)."""
    sock.sendall(bytes([command]) + string(key) + struct.pack("<Q", size))
    piece = fill * (4 * MIB)
    left = size
    while left:
        n = min(left, len(piece))
        sock.sendall(memoryview(piece)[:n])
        left -= n


def num_keys(sock):
    sock.sendall(bytes([NUM_KEYS]))
    return struct.unpack("<q", recv_exact(sock, 8))[0]


def get(sock, key):
    sock.sendall(bytes([GET]) + string(key))
    size = struct.unpack("<Q", recv_exact(sock, 8))[0]
    return recv_exact(sock, size)


def delete(sock, key):
    sock.sendall(bytes([DELETE_KEY]) + string(key))
    return struct.unpack("<q", recv_exact(sock, 8))[0]


def is_closed(sock, timeout=30):
    """True when the server closes the connection (EOF or reset) within `timeout`; reads and
    discards whatever arrives first."""
    sock.settimeout(timeout)
    try:
        while sock.recv(MIB):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def probe_main(host, port):
    """GETNUMKEYS every 10 ms until stdin closes; prints {count, worst_ms, p99_ms, waits}."""
    sock = connect(host, port)
    waits = []  # (start offset s, wait s)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    print("ready", flush=True)
    t0 = time.monotonic()
    while not done.is_set():
        start = time.monotonic()
        num_keys(sock)
        waits.append((start - t0, time.monotonic() - start))
        time.sleep(max(0.0, 0.01 - (time.monotonic() - start)))
    ordered = sorted(w for _, w in waits)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
    print(json.dumps({"count": len(waits), "worst_ms": 1000 * max(ordered, default=0.0),
                      "p99_ms": 1000 * p99, "waits": waits}), flush=True)


class Probe:
    """The probe in its own process (so the abuser's Python never delays its timing)."""

    def __init__(self, host, port):
        self.proc = subprocess.Popen([sys.executable, "-u", __file__, "probe", host, str(port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the probe did not start")
        self.t0 = time.monotonic()

    def finish(self):
        out, _ = self.proc.communicate(input="", timeout=120)
        result = json.loads(out)
        # The probe's clock started at its "ready"; within a few ms of self.t0.
        return result


class RssSampler:
    """The server's peak RSS, sampled every 20 ms."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, rss_mb(pid), threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.02):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return

    def finish(self):
        self.stop.set()
        self.thread.join()
        return max(self.peak, rss_mb(self.pid))


# Each case: fn(host, port, note) -> dict of outcomes; note("abuse") marks the abuse's start and
# end, so that the probe's answers during the abuse can be counted.

def case_big_set(host, port, mark):
    sock = connect(host, port)
    mark()
    send_value(sock, SET, "/abuse/big", 256 * MIB)
    num_keys(sock)  # the SET is stored once this is answered
    mark()
    delete(sock, "/abuse/big")
    return {}


def case_flood(host, port, mark, seconds=4.0):
    sock = connect(host, port)
    batch = b"".join(bytes([SET]) + string("/abuse/flood") + string(b"f" * 75)
                     for _ in range(10000))  # 100-byte SETs, 1 MB per sendall
    mark()
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        sock.sendall(batch)
        sent += 10000
    num_keys(sock)
    mark()
    delete(sock, "/abuse/flood")
    return {"sets": sent}


def case_append(host, port, mark):
    sock = connect(host, port)
    mark()
    start = time.monotonic()
    for _ in range(100):
        send_value(sock, APPEND, "/abuse/log", MIB)
    num_keys(sock)
    took = time.monotonic() - start
    mark()
    sock.sendall(bytes([GET]) + string("/abuse/log"))
    size = struct.unpack("<Q", recv_exact(sock, 8))[0]
    recv_exact(sock, size)
    delete(sock, "/abuse/log")
    return {"append_s": took, "size_mib": size / MIB}


def case_multi_get(host, port, mark, pid):
    setter = connect(host, port)
    send_value(setter, SET, "/abuse/mb", MIB)
    num_keys(setter)
    request = bytes([MULTI_GET]) + struct.pack("<Q", 1) + string("/abuse/mb")
    greedy = [connect(host, port) for _ in range(2)]
    mark()
    threads = [threading.Thread(target=lambda s=s: s.sendall(request * 1024)) for s in greedy]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    time.sleep(1.0)  # what the server queues for them, it has queued by now
    held = rss_mb(pid)
    mark()
    for s in greedy:
        s.close()
    delete(setter, "/abuse/mb")
    return {"rss_held_mb": held}


def case_readers(host, port, mark):
    setter = connect(host, port)
    send_value(setter, SET, "/abuse/shared", 128 * MIB)
    num_keys(setter)
    readers = [connect(host, port) for _ in range(4)]
    mark()
    for r in readers:
        r.sendall(bytes([GET]) + string("/abuse/shared"))
    for r in readers:
        size = struct.unpack("<Q", recv_exact(r, 8))[0]
        recv_exact(r, size)
    mark()
    delete(setter, "/abuse/shared")
    time.sleep(0.5)
    return {"readers_open": len(readers)}  # the readers stay connected while RSS is read


def case_append_limit(host, port, mark):
    first, second = connect(host, port), connect(host, port)
    mark()
    send_value(first, APPEND, "/abuse/huge", 600 * MIB)
    num_keys(first)
    refused = False
    try:
        send_value(second, APPEND, "/abuse/huge", 600 * MIB)
        refused = is_closed(second)
    except (ConnectionResetError, BrokenPipeError):
        refused = True
    mark()
    size = len(get(first, "/abuse/huge"))
    delete(first, "/abuse/huge")
    return {"second_refused": refused, "size_mib": size / MIB}


def case_watcher(host, port, mark):
    watcher = connect(host, port)
    watcher.sendall(bytes([WATCH_KEY]) + string("/abuse/watched"))
    recv_exact(watcher, 1)
    writer = connect(host, port)
    mark()
    for _ in range(300):
        send_value(writer, SET, "/abuse/watched", MIB)
    num_keys(writer)
    mark()
    closed = is_closed(watcher, timeout=5)
    delete(writer, "/abuse/watched")
    return {"watcher_closed": closed}


CASES = {
    "big_set": ("SET of one 256 MiB value", case_big_set),
    "flood": ("pipelined 100-byte SETs for 4 s, never reading", case_flood),
    "append": ("100 x APPEND of 1 MiB to one key", case_append),
    "multi_get": ("two clients MULTI_GET one 1 MiB key 1024 times, never reading",
                  case_multi_get),
    "readers": ("4 readers of a 128 MiB key, then the key deleted", case_readers),
    "append_limit": ("two 600 MiB APPENDs to one key (1 GiB value limit)", case_append_limit),
    "watcher": ("a watcher that never reads, 300 x 1 MiB updates", case_watcher),
}
# PyTorch 1.13's own server closes the connection on commands above DELETE_KEY.
NEEDS_2_0_COMMANDS = {"append", "multi_get", "append_limit"}


def run_case(host, port, pid, name, **kwargs):
    """Runs one case with the probe beside it; returns its outcomes and figures."""
    _, fn = CASES[name]
    rss_before = rss_mb(pid)
    probe = Probe(host, port)
    sampler = RssSampler(pid)
    marks = []

    def mark():
        marks.append(time.monotonic() - probe.t0)

    if name == "multi_get":
        kwargs["pid"] = pid
    outcome = fn(host, port, mark, **kwargs)
    time.sleep(0.2)
    rss_peak = sampler.finish()
    result = probe.finish()
    # Probes both sent and answered while the abuse went on.
    during = [w for start, w in result["waits"] if marks[0] <= start and start + w <= marks[-1]]
    time.sleep(0.3)
    outcome.update({
        "case": name, "worst_ms": result["worst_ms"], "p99_ms": result["p99_ms"],
        "probes": result["count"], "probes_during": len(during),
        "abuse_s": marks[-1] - marks[0], "rss_before_mb": rss_before, "rss_peak_mb": rss_peak,
        "rss_after_mb": rss_mb(pid)})
    return outcome


def main():
    if sys.argv[1] == "probe":
        probe_main(sys.argv[2], int(sys.argv[3]))
        return
    host, port, pid = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for name in sys.argv[5:]:
        try:
            print(json.dumps(run_case(host, port, pid, name)), flush=True)
        except (OSError, ValueError) as e:
            print(json.dumps({"case": name, "error": str(e)}), flush=True)


if __name__ == "__main__":
    main()
