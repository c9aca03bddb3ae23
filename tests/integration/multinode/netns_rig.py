"""Helpers for tests that run ddprun agents as nodes in network namespaces (scripts/
netns-cluster.sh): bring the rig up and always down, start an agent in a node, read records."""

import glob
import json
import os
import signal
import subprocess
import sys
import uuid

import ddptest

SCRIPT = os.path.join(ddptest.SOURCE_DIR, "scripts/netns-cluster.sh")
HERE = os.path.dirname(os.path.abspath(__file__))


def require_rig():
    ddptest.require_root()
    ok = subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0
    ddptest.require(ok, "iproute2 'ip netns' is not usable")


def torch_job_env():
    """For tests of PyTorch jobs on the rig: skips without root, `ip netns` or torch; returns
    (tag, env): the agents' environment, gloo on the nodes' eth0 and DDP_TEST_TAG=tag, by which
    check_no_processes() finds what is left."""
    require_rig()
    ddptest.require_torch()
    tag = uuid.uuid4().hex[:12]
    return tag, {"GLOO_SOCKET_IFNAME": "eth0", "DDP_TEST_TAG": tag}


def rig(*args, check=True):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, check=check,
                          timeout=30)


def addr(node):
    return f"10.213.0.{node}"


class Cluster:
    """`with Cluster(n) as c:` brings nodes 1..n up and tears everything down on exit."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.agents = []

    def __enter__(self):
        rig("down")
        rig("up", str(self.nodes))
        return self

    def __exit__(self, *exc):
        for p in self.agents:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        rig("down", check=False)
        return False

    def start(self, node, args, env=None):
        """Starts `ddprun args` in node's namespace; stdout/stderr are captured."""
        cmd = ["ip", "netns", "exec", f"ddpn{node}", ddptest.bin_path("ddprun"), *args]
        p = ddptest.spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.agents.append(p)
        return p

    def start_node(self, node, args, env):
        """start() that remembers the agent as agents_by_node[node] (the latest per node)."""
        self.agents_by_node = getattr(self, "agents_by_node", {})
        self.agents_by_node[node] = self.start(node, args, env=env)

    def cut(self, node):
        rig("cut", str(node))

    def heal(self, node):
        rig("heal", str(node))


def check_no_processes(tag, what):
    """Fails the test unless every process started with DDP_TEST_TAG=tag is gone within 30 s."""
    gone = ddptest.wait_until(lambda: not ddptest.processes_with_env(f"DDP_TEST_TAG={tag}"), 30)
    ddptest.check(gone, f"{what}: processes left: "
                        f"{ddptest.processes_with_env(f'DDP_TEST_TAG={tag}')}")


def finish(proc, timeout, what):
    """Waits for an agent; returns (rc, stderr). Fails the test naming `what` on a hang."""
    rc, _, err = finish_with_output(proc, timeout, what)
    return rc, err


def finish_with_output(proc, timeout, what):
    """As finish(), returning (rc, stdout, stderr)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        ddptest.fail(f"{what} did not exit within {timeout} s\n--- stderr\n{err}")
    return proc.returncode, out, err


def records(out_dir, pattern="env_rank*.json"):
    result = []
    for path in glob.glob(os.path.join(out_dir, pattern)):
        with open(path) as f:
            result.append(json.load(f)["env"])
    return result


def c10d_args(nnodes, rdzv_id, extra_conf="", nproc=1):
    conf = "join_timeout=60,keep_alive_interval=1,keep_alive_max_attempt=2,read_timeout=10"
    if extra_conf:
        conf += "," + extra_conf
    return [f"--nnodes={nnodes}", f"--nproc_per_node={nproc}", "--rdzv_backend=c10d",
            f"--rdzv_endpoint={addr(1)}:29400", f"--rdzv_id={rdzv_id}", f"--rdzv_conf={conf}",
            "--python", sys.executable]
