"""Raw PyTorch TCPStore bytes for the tests' own clients and workers (standard library only): the
1.13 dialect's command bytes, a key or value on the wire, ddprun's HELLO, connecting with a
timeout, and reading replies (exactly, at most, or until the store closes). Importable from tests/integration (on
PYTHONPATH under ctest; scripts run elsewhere put this folder on sys.path themselves)."""

import socket
import struct

# The 1.13 dialect's command bytes (docs/protocol.md).
SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, WATCH_KEY, DELETE_KEY = range(9)
# 2.x connections start with VALIDATE: 0x00 and this magic (u32 little-endian).
VALIDATE_MAGIC = 0x3C85F7CE
# ddprun's handshake HELLO (version 2) reporting no address (docs/protocol.md, "Authentication").
HELLO = bytes([0xDD]) + b"ddprun" + bytes([2, 0])


def text(value):
    """A key or value on the wire: u64 little-endian length, then the bytes (str is UTF-8)."""
    data = value.encode() if isinstance(value, str) else value
    return struct.pack("<Q", len(data)) + data


def i64(value):
    """ADD's amount (and reply): i64 little-endian."""
    return struct.pack("<q", value)


def connect(address, timeout=5):
    """A connection to (host, port) whose connect and reads give up after `timeout` seconds."""
    s = socket.create_connection(address, timeout=timeout)
    s.settimeout(timeout)
    return s


def read_exact(sock, count):
    """Exactly count bytes; ConnectionError when the store closes first."""
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"the store closed the connection after {len(data)} of "
                                  f"{count} bytes")
        data += chunk
    return data


def read_some(sock, count, timeout_is_error=False):
    """Up to count bytes; fewer (b"" at once) when the store closes or resets the connection, or
    goes silent (then socket.timeout is raised instead when timeout_is_error)."""
    data = b""
    try:
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    except socket.timeout:
        if timeout_is_error:
            raise
    return data


def closed_by_server(sock):
    """True when the store closed (or reset) the connection before the socket's timeout; False
    when it stayed open (silent, or it sent something)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
