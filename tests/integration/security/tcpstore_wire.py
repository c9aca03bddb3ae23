"""PyTorch 1.13 TCPStore bytes for the security tests' raw clients (standard library only):
a key or value on the wire, connecting with a timeout, and reading replies."""

import socket
import struct

SET, GET, ADD = 0, 2, 3  # the 1.13 dialect's command bytes


def text(value):
    """A 1.13 string: u64 little-endian length, then the bytes."""
    data = value.encode()
    return struct.pack("<Q", len(data)) + data


def connect(address, timeout=5):
    s = socket.create_connection(address, timeout=timeout)
    s.settimeout(timeout)
    return s


def read_exact(sock, count):
    """Exactly count bytes; ConnectionError when the store closes first."""
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the store closed the connection")
        data += chunk
    return data


def read_some(sock, count):
    """Up to count bytes; fewer (b"" at once) when the store closes, resets or goes silent."""
    data = b""
    try:
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data
