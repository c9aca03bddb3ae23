"""Helpers for the etcd rendezvous tests: a real 3-member etcd 3.4 cluster on loopback started
with scripts/etcd-cluster.sh (skipped when etcd is not installed, unless DDP_REQUIRE_ALL=1), and
ddprun agents that use it.
"""

import json
import os
import random
import shutil
import socket
import subprocess

import ddptest

SCRIPT = os.path.join(ddptest.SOURCE_DIR, "scripts/etcd-cluster.sh")


def require_etcd():
    ddptest.require(shutil.which("etcd") is not None and shutil.which("etcdctl") is not None,
                    "etcd is not installed (apt-get install etcd-server etcd-client)")


def _ports_free(base, count=6):
    for port in range(base, base + count):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def make_certs(directory, *ips):
    """A throwaway CA with a server certificate (127.0.0.1, localhost, IPS) and a client
    certificate in DIRECTORY (ca.crt, server.crt/.key, client.crt/.key)."""
    ddptest.require(shutil.which("openssl") is not None, "openssl is not installed")
    subprocess.run([SCRIPT, "certs", directory, *ips], check=True, capture_output=True, timeout=60)
    return directory


class Cluster:
    """A 3-member cluster; members listen on base, base+2, base+4 (peers one above each). With
    tls_dir (make_certs), clients must speak https and show a client certificate."""

    def __init__(self, tls_dir=None):
        require_etcd()
        for _ in range(50):
            base = random.randrange(20000, 40000, 8)
            if _ports_free(base):
                break
        self.base = base
        tls = ["--tls", tls_dir] if tls_dir else []
        result = subprocess.run([SCRIPT, "up", str(base), *tls], capture_output=True, text=True,
                                timeout=60)
        if result.returncode != 0:
            self.down()
            ddptest.fail(f"etcd cluster did not start: {result.stderr}")
        self.endpoints = result.stdout.strip()

    def kill_member(self, index):
        subprocess.run([SCRIPT, "kill", str(self.base), str(index)], check=True, timeout=30)

    def down(self):
        subprocess.run([SCRIPT, "down", str(self.base)], capture_output=True, timeout=60)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()


def agent_cmd(endpoints, run_id, nnodes, nproc, worker, conf="", extra=()):
    """A ddprun command line for the etcd backend."""
    cmd = [ddptest.bin_path("ddprun"), f"--nnodes={nnodes}", f"--nproc_per_node={nproc}",
           "--rdzv_backend=etcd", f"--rdzv_endpoint={endpoints}", f"--rdzv_id={run_id}",
           "--log_level=info"]
    if conf:
        cmd.append(f"--rdzv_conf={conf}")
    return cmd + list(extra) + list(worker)


def spawn_agents(cmds, log_dir, tag):
    """Starts each command with stdout+stderr in LOG_DIR/TAG<i>.log; returns (procs, paths)."""
    procs, paths = [], []
    for i, cmd in enumerate(cmds):
        path = os.path.join(log_dir, f"{tag}{i}.log")
        with open(path, "w") as log:
            procs.append(ddptest.spawn(cmd, stdout=log, stderr=subprocess.STDOUT))
        paths.append(path)
    return procs, paths


def wait_all(procs, timeout):
    """Exit codes of every process; fails the test when one is still running after `timeout`."""
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            ddptest.fail(f"agent pid {p.pid} still running after {timeout} s")
    return codes


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
            p.wait()


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def events(path):
    """The events of an agent's --event_log so far ([] before it exists)."""
    try:
        return [json.loads(line) for line in open(path) if line.strip()]
    except FileNotFoundError:
        return []
