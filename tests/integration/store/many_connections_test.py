"""10,000 concurrent connections to one `ddp-store serve` process are all served: half of them park
a WAIT that one SET releases at once, then every one of them gets a correct reply."""

import os
import resource
import selectors
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import ddptest  # noqa: E402
import store_servers  # noqa: E402

CONNECTIONS = 10_000


def string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ddptest.require(hard == resource.RLIM_INFINITY or hard >= need,
                    f"RLIMIT_NOFILE hard limit {hard} < {need} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def read_replies(socks, size, timeout):
    """Reads `size` bytes from every socket; returns {sock: bytes}."""
    selector = selectors.DefaultSelector()
    got = {}
    for sock in socks:
        got[sock] = b""
        selector.register(sock, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    pending = len(socks)
    while pending and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=1):
            sock = key.fileobj
            chunk = sock.recv(size - len(got[sock]))
            ddptest.check(chunk, "the server closed a connection")
            got[sock] += chunk
            if len(got[sock]) == size:
                selector.unregister(sock)
                pending -= 1
    selector.close()
    ddptest.check(pending == 0, f"{pending} of {len(socks)} connections got no reply in {timeout}s")
    return got


def main():
    raise_fd_limit(CONNECTIONS + 256)
    with store_servers.ddp_store() as server:
        socks = []
        start = time.monotonic()
        for _ in range(CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            sock.setblocking(False)
            socks.append(sock)
        connected = time.monotonic() - start
        waiters = socks[::2]
        for sock in waiters:  # 1.13 WAIT ["/go"]
            sock.send(b"\x05" + struct.pack("<Q", 1) + string("/go"))
        setter = socks[1]
        setter.send(b"\x00" + string("/go") + string("now"))  # 1.13 SET
        replies = read_replies(waiters, 1, timeout=60)
        ddptest.check(all(r == b"\x00" for r in replies.values()), "a waiter got no STOP_WAITING")
        for sock in socks:  # 1.13 GETNUMKEYS
            sock.send(b"\x06")
        replies = read_replies(socks, 8, timeout=60)
        ddptest.check(all(struct.unpack("<q", r)[0] == 1 for r in replies.values()),
                      "a GETNUMKEYS reply is wrong")
        for sock in socks:
            sock.close()
        code, err = server.stop()
        ddptest.check(code == 0, f"ddp-store exited {code}: {err}")
    print(f"ok: {CONNECTIONS} connections opened in {connected:.2f}s, all served")


if __name__ == "__main__":
    main()
