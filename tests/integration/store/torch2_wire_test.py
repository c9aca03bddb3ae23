"""The 2.x dialect's newest commands against a live `ddp-store serve`, as raw bytes the way PyTorch
2.x's TCPStore client sends them (VALIDATE + PING, then QUEUE_PUSH/POP/LEN, LIST_KEYS, BARRIER,
CANCEL_WAIT): several clients at once, a blocking pop woken by another client's push, one push
waking one of two waiters, a barrier of three, a cancelled barrier. The stream must stay in
step (a COMPARE_SET and an ADD after), and the server logs no closed connection."""

import os
import select
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import ddptest  # noqa: E402
import store_servers  # noqa: E402
from store_abuse import connect, recv_exact, string  # noqa: E402

# 2.x numbering (spec/torchrun.md §5.2).
SET, COMPARE_SET, GET, ADD, WAIT, CANCEL_WAIT, PING = 1, 2, 3, 4, 6, 12, 13
QUEUE_PUSH, QUEUE_POP, QUEUE_LEN, LIST_KEYS, BARRIER = 14, 15, 16, 17, 18
STOP_WAITING, WAIT_CANCELED = b"\x00", b"\x01"


def i64(value):
    return struct.pack("<q", value)


class Client:
    """One 2.x connection: VALIDATE, then PING with a nonce echoed back."""

    def __init__(self, port):
        self.sock = connect("127.0.0.1", port)
        self.sock.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))
        self.sock.sendall(bytes([PING]) + struct.pack("<I", os.getpid()))
        ddptest.check(recv_exact(self.sock, 4) == struct.pack("<I", os.getpid()), "PING echo")

    def send(self, command, *fields):
        self.sock.sendall(bytes([command]) + b"".join(fields))

    def read_i64(self):
        return struct.unpack("<q", recv_exact(self.sock, 8))[0]

    def read_value(self):
        return recv_exact(self.sock, self.read_i64())

    def pop(self, key):
        self.send(QUEUE_POP, string(key))
        length = self.read_i64()
        return length, (self.read_value() if length > 0 else None)

    def queue_len(self, key):
        self.send(QUEUE_LEN, string(key))
        return self.read_i64()

    def has_reply(self, seconds):
        return bool(select.select([self.sock], [], [], seconds)[0])


def main():
    with store_servers.ddp_store() as server:
        a, b, c = Client(server.port), Client(server.port), Client(server.port)

        a.send(QUEUE_PUSH, string("/q"), string("first"))
        a.send(QUEUE_PUSH, string("/q"), string("second"))
        ddptest.check(a.queue_len("/q") == 2, "queue_len after two pushes")
        ddptest.check(a.pop("/q") == (2, b"first"), "pop answers the length before, then FIFO")
        ddptest.check(b.pop("/q") == (1, b"second"), "pop from another client")
        ddptest.check(b.pop("/q") == (0, None), "pop of an empty queue answers 0 only")
        ddptest.check(c.queue_len("/never") == 0, "queue_len of an unknown queue")

        # Blocking pops (WAIT, then QUEUE_POP) on two clients; one push wakes exactly one.
        b.send(WAIT, i64(1), string("/jobs"))
        c.send(WAIT, i64(1), string("/jobs"))
        ddptest.check(not b.has_reply(0.2) and not c.has_reply(0), "waiters answered early")
        a.send(QUEUE_PUSH, string("/jobs"), string("late"))
        select.select([b.sock, c.sock], [], [], 5)
        first, second = (b, c) if b.has_reply(0) else (c, b)
        ddptest.check(first.has_reply(0), "the push woke neither waiter")
        ddptest.check(not second.has_reply(0.2), "one push woke both waiters")
        ddptest.check(recv_exact(first.sock, 1) == STOP_WAITING, "STOP_WAITING to the woken")
        ddptest.check(first.pop("/jobs") == (1, b"late"), "the woken client pops the value")
        a.send(QUEUE_PUSH, string("/jobs"), string("later"))
        ddptest.check(second.has_reply(5), "the second push did not wake the second waiter")
        ddptest.check(recv_exact(second.sock, 1) == STOP_WAITING, "STOP_WAITING to the second")
        ddptest.check(second.pop("/jobs") == (1, b"later"), "the second waiter's pop")

        # LIST_KEYS: the table's keys (not the queues), each a u64-length string.
        a.send(SET, string("/b"), string("2"))
        a.send(SET, string("/a"), string("1"))
        a.send(LIST_KEYS)
        keys = sorted(a.read_value() for _ in range(a.read_i64()))
        ddptest.check(keys == [b"/a", b"/b"], f"list_keys answered {keys}")

        # BARRIER of three: the last arrival is answered at once and wakes the other two.
        b.send(BARRIER, string("/bar"), i64(3))
        c.send(BARRIER, string("/bar"), i64(3))
        ddptest.check(not b.has_reply(0.2) and not c.has_reply(0), "barrier passed early")
        a.send(BARRIER, string("/bar"), i64(3))
        for name, x in (("a", a), ("b", b), ("c", c)):
            ddptest.check(recv_exact(x.sock, 1) == STOP_WAITING, f"barrier: {name} not released")

        # A barrier whose client times out: CANCEL_WAIT, and the count stays.
        b.send(BARRIER, string("/bar2"), i64(2))
        b.send(CANCEL_WAIT)
        ddptest.check(recv_exact(b.sock, 1) == WAIT_CANCELED, "CANCEL_WAIT of a barrier")
        c.send(BARRIER, string("/bar2"), i64(2))
        ddptest.check(recv_exact(c.sock, 1) == STOP_WAITING, "second arrival after a cancel")
        ddptest.check(not b.has_reply(0.2), "the cancelled barrier was answered")

        # Still in step on every connection.
        a.send(COMPARE_SET, string("/a"), string("1"), string("z"))
        ddptest.check(a.read_value() == b"z", "compare_set after the new commands")
        b.send(ADD, string("/n"), i64(41))
        ddptest.check(b.read_i64() == 41, "add after the new commands")
        c.send(GET, string("/bar2"))
        ddptest.check(c.read_value() == b"2", "the barrier's counter")
        code, err = server.stop()
    ddptest.check(code == 0, f"ddp-store exited {code}: {err}")
    ddptest.check("closing store connection" not in err, f"a connection was closed:\n{err}")
    print("ok")


if __name__ == "__main__":
    main()
