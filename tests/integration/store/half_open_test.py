"""Half-open peers (issue 15): `ddp-store serve --keepalive_s 4` in one network namespace, a client
in another holding an idle connection and one with part of a request; the client's link is cut,
so no FIN or reset ever comes. The server drops both (TCP keepalive; the partial-request timeout)
and keeps serving. Prints how long it took."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "multinode"))
import ddptest  # noqa: E402
import netns_rig  # noqa: E402
import store_servers  # noqa: E402
from ddptest import check  # noqa: E402

KEEPALIVE_S = 4
CLIENT = """
import socket, struct, sys, time
host, port = sys.argv[1], int(sys.argv[2])
idle = socket.create_connection((host, port))
idle.sendall(b"\\x06")
assert len(idle.recv(8)) == 8
partial = socket.create_connection((host, port))
partial.sendall(b"\\x00" + struct.pack("<Q", 2) + b"/k" + struct.pack("<Q", 1000) + b"abc")
print("connected", flush=True)
time.sleep(600)
"""


def established(port):
    out = subprocess.run(["ip", "netns", "exec", "ddpn1", "ss", "-Htn", "state", "established",
                          f"( sport = :{port} )"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.strip()]


def main():
    netns_rig.require_rig()
    with netns_rig.Cluster(2) as cluster:
        cmd = ["ip", "netns", "exec", "ddpn1", ddptest.bin_path("ddp-store"), "serve", "--host",
               "0.0.0.0", "--port", "0", "--keepalive_s", str(KEEPALIVE_S)]
        with store_servers.Server(cmd) as server:
            client = ddptest.spawn(["ip", "netns", "exec", "ddpn2", ddptest.TORCH_PYTHON, "-c",
                                    CLIENT, netns_rig.addr(1), str(server.port)],
                                   stdout=subprocess.PIPE, text=True)
            cluster.agents.append(client)  # killed by the cluster on the way out
            check(client.stdout.readline().strip() == "connected", "the client did not connect")
            check(ddptest.wait_until(lambda: len(established(server.port)) == 2, 10),
                  f"expected 2 connections from node 2: {established(server.port)}")
            cluster.cut(2)
            start = time.monotonic()
            dropped = ddptest.wait_until(lambda: not established(server.port), 30, 0.1)
            took = time.monotonic() - start
            check(dropped, f"half-open connections still held 30 s after the cut: "
                           f"{established(server.port)}")
            check(took < 5 * KEEPALIVE_S, f"dropped only after {took:.1f} s")
            # Still serving: a client from the root namespace over the bridge.
            out = subprocess.run([ddptest.TORCH_PYTHON, "-c", CLIENT.replace(
                "time.sleep(600)", ""), netns_rig.addr(1), str(server.port)],
                capture_output=True, text=True, timeout=30)
            check("connected" in out.stdout, f"the server stopped serving: {out.stderr}")
            rc, err = server.stop()
    check(rc == 0, f"ddp-store exited {rc}\n{err}")
    check("part of a request and nothing more" in err, f"no line for the partial request:\n{err}")
    print(f"ok half-open peers dropped {took:.1f} s after the cut (keepalive {KEEPALIVE_S} s)")


main()
