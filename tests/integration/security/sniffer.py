"""Captures a real agent's store handshake off the wire, as an eavesdropper on the bridge would:
an AF_PACKET socket on a node's host-side veth (root namespace) keeps the payload of the first
TCP segment the node sends to the store's port that carries a tag (32 bytes, plus VALIDATE and
PING for a 2.x client). Root only; used by the outsider test for its replay attack."""

import socket
import struct
import threading
import time

ETH_P_ALL = 0x0003


class Sniffer:
    def __init__(self, interface, port):
        self.port = port
        self.payload = None
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(ETH_P_ALL))
        self.sock.bind((interface, 0))
        self.sock.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop and self.payload is None:
            try:
                frame = self.sock.recv(65535)
            except socket.timeout:
                continue
            if len(frame) < 34 or struct.unpack("!H", frame[12:14])[0] != 0x0800:
                continue
            ip = frame[14:]
            ihl = (ip[0] & 15) * 4
            if ip[9] != 6:  # TCP
                continue
            total = struct.unpack("!H", ip[2:4])[0]
            tcp = ip[ihl:total]
            dst_port = struct.unpack("!H", tcp[2:4])[0]
            offset = (tcp[12] >> 4) * 4
            data = tcp[offset:]
            if dst_port == self.port and len(data) in (32, 32 + 10):
                self.payload = bytes(data)

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.payload is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.stop = True
        self.thread.join()
        self.sock.close()
        return self.payload
