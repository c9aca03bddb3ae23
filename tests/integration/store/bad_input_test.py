"""Bad input against a live `ddp-store serve`: garbage, a truncated frame, a 2^60 length, an unknown
command. Each offending connection gets one log line naming its peer and is closed; a client that
keeps talking throughout is served every time. Also: a taken port, and SIGINT."""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import ddptest  # noqa: E402
import store_servers  # noqa: E402
import tcpstore_wire  # noqa: E402
from tcpstore_wire import VALIDATE_MAGIC, closed_by_server, i64, read_exact, text  # noqa: E402


def connect(port):
    return tcpstore_wire.connect(("127.0.0.1", port))


def recv_exact(sock, n):
    try:
        return read_exact(sock, n)
    except ConnectionError as e:
        ddptest.fail(f"server closed a good connection: {e}")


class GoodClient:
    """A 2.x client doing ADD round trips between the bad ones."""

    def __init__(self, port):
        self.sock = connect(port)
        self.sock.sendall(b"\x00" + struct.pack("<I", VALIDATE_MAGIC))
        self.count = 0

    def round_trip(self):
        self.sock.sendall(b"\x04" + text("/good") + i64(1))
        self.count += 1
        value = struct.unpack("<q", recv_exact(self.sock, 8))[0]
        ddptest.check(value == self.count, f"good client got {value}, expected {self.count}")


BAD_INPUTS = {
    "garbage": b"\xff\xfe\xfd\xfc garbage",
    "2^60 length": b"\x00" + text("/k") + struct.pack("<Q", 1 << 60),
    "2^60 key length": b"\x02" + struct.pack("<Q", 1 << 60),
    "unknown 2.x command": b"\x00" + struct.pack("<I", VALIDATE_MAGIC) + b"\x13",
    "2.x QUEUE_PUSH on a 1.13 connection": b"\x0e" + text("/q") + text("v"),
    "2^60 keys in a WAIT": b"\x05" + struct.pack("<Q", 1 << 60),
}


def main():
    with store_servers.ddp_store() as server:
        good = GoodClient(server.port)
        good.round_trip()
        peers = []
        for name, payload in BAD_INPUTS.items():
            sock = connect(server.port)
            peers.append("127.0.0.1:%d" % sock.getsockname()[1])
            sock.sendall(payload)
            ddptest.check(closed_by_server(sock), f"{name}: the connection stayed open")
            sock.close()
            good.round_trip()
        # A truncated frame: half a SET, then the peer goes away mid-request.
        truncated = connect(server.port)
        truncated.sendall(b"\x00" + struct.pack("<Q", 3) + b"/k")
        good.round_trip()
        truncated.close()
        # A truncated frame that stays open does not stall anybody else (no blocking reads).
        stalled = connect(server.port)
        stalled.sendall(b"\x04" + text("/good")[:5])
        for _ in range(3):
            good.round_trip()
        stalled.close()
        good.round_trip()

        # Port taken: a second server on the same port fails, naming the port and the owner.
        result = ddptest.run([ddptest.bin_path("ddp-store"), "serve", "--host", "127.0.0.1",
                              "--port", str(server.port)], timeout=20)
        ddptest.check(result.returncode == 1, f"second server exited {result.returncode}")
        want = f"port {server.port} is taken by pid {server.proc.pid} (ddp-store)"
        ddptest.check(want in result.stderr, f"expected {want!r} in: {result.stderr!r}")

        code, err = server.stop(sig=2)  # SIGINT
        ddptest.check(code == 0, f"exit code {code} after SIGINT: {err}")
    lines = [line for line in err.splitlines() if "closing store connection" in line]
    ddptest.check(len(lines) == len(BAD_INPUTS), f"{len(lines)} log lines for "
                  f"{len(BAD_INPUTS)} bad connections:\n{err}")
    for peer, line in zip(peers, lines):
        ddptest.check(peer in line, f"log line does not name peer {peer}: {line}")
    print("\n".join(lines))
    print("ok")


if __name__ == "__main__":
    main()
