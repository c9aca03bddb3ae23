"""The soak's nodes: network namespaces ddps1..N (scripts/netns-cluster.sh's second rig,
DDP_NETNS_RIG=soak, 10.215.0.0/24, so a soak runs beside the netns tests), one ddprun agent each,
the etcd members (etcd backend), each node's log directory on a tmpfs of its own, and what the soak
reads off the processes (workers, RSS, descriptors)."""

import os
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../.."))
RIG = os.path.join(ROOT, "scripts/netns-cluster.sh")
NS = "ddps"
PREFIX = "10.215.0"
BRIDGE_ADDR = f"{PREFIX}.254"
ETCD_BASE = 23850  # members on the bridge address: client ports BASE, BASE+2, BASE+4


def rig(*args, check=True):
    return subprocess.run(["bash", RIG, *args], capture_output=True, text=True, check=check,
                          timeout=30, env=dict(os.environ, DDP_NETNS_RIG="soak"))


def addr(node):
    return f"{PREFIX}.{node}"


def namespace_pids(node):
    out = subprocess.run(["ip", "netns", "pids", f"{NS}{node}"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def kill_pids(pids, sig=signal.SIGKILL):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_worker(pid):
    """A soak worker: an interpreter running soak_worker.py, or ddp-train (not an agent naming
    either)."""
    argv = cmdline(pid).split()
    if argv and os.path.basename(argv[0]) == "ddp-train":
        return True
    return len(argv) > 1 and "python" in os.path.basename(argv[0]) and \
        any(a.endswith("soak_worker.py") for a in argv[1:3])


def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def fd_targets(pid):
    """What each of the process's descriptors points at (None when it is gone)."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    targets = []
    for name in names:
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{name}"))
        except OSError:
            pass
    return targets


class Tmpfs:
    """A small tmpfs mounted at `path` (a node's log directory): fill() leaves it with no room,
    drain() gives the room back."""

    def __init__(self, path, size="8m"):
        self.path = path
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], check=True)

    def fill(self):
        with open(os.path.join(self.path, "filler"), "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass

    def drain(self):
        try:
            os.remove(os.path.join(self.path, "filler"))
        except FileNotFoundError:
            pass

    def unmount(self):
        subprocess.run(["umount", "-l", self.path], check=False)


class Etcd:
    """Three etcd members on the bridge address, reachable from every node."""

    def __init__(self, work):
        self.work = work
        self.members = {}

    def endpoints(self):
        return ",".join(f"{BRIDGE_ADDR}:{ETCD_BASE + 2 * m}" for m in range(3))

    def start(self, member, state="new"):
        client = f"http://{BRIDGE_ADDR}:{ETCD_BASE + 2 * member}"
        peer = f"http://{BRIDGE_ADDR}:{ETCD_BASE + 2 * member + 1}"
        cluster = ",".join(f"s{m}=http://{BRIDGE_ADDR}:{ETCD_BASE + 2 * m + 1}" for m in range(3))
        log = open(os.path.join(self.work, f"etcd{member}.log"), "a")
        self.members[member] = subprocess.Popen(
            ["etcd", "--name", f"s{member}", "--data-dir", os.path.join(self.work, f"etcd{member}"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", cluster, "--initial-cluster-token", "ddprun-soak",
             "--initial-cluster-state", state, "--log-level", "warn", "--logger", "zap"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, GOMAXPROCS="1"))

    def start_all(self):
        for m in range(3):
            self.start(m)
        deadline = time.time() + 30
        while time.time() < deadline:
            ok = subprocess.run(["etcdctl", f"--endpoints={self.endpoints()}",
                                 "--command-timeout=1s", "put", "/soak/probe", "1"],
                                env=dict(os.environ, ETCDCTL_API="3"), capture_output=True,
                                timeout=10).returncode == 0
            if ok:
                return
            time.sleep(0.2)
        raise RuntimeError("the soak's etcd cluster has no leader after 30 s")

    def kill(self, member):
        p = self.members.get(member)
        if p and p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def is_running(self, member):
        p = self.members.get(member)
        return p is not None and p.poll() is None

    def stop_all(self):
        for m in list(self.members):
            self.kill(m)


class Agent:
    """One ddprun agent in a node's namespace, started by `ip netns exec` (which execs ddprun, so
    the Popen's pid is the agent's)."""

    def __init__(self, node, index, argv, log_path, env):
        self.node = node
        self.index = index
        self.started = time.time()
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(["ip", "netns", "exec", f"{NS}{node}", *argv],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True,
                                     env=dict(os.environ, GLOO_SOCKET_IFNAME="eth0", **env))
        self.samples = []  # (t, rss_kib, fds)
        self.fds_first = self.fds_last = None  # descriptor targets, after the warm-up

    @property
    def pid(self):
        return self.proc.pid

    def is_running(self):
        return self.proc.poll() is None

    def workers(self):
        """The live soak workers under this agent (its children: soak_worker.py or ddp-train)."""
        return [p for p in namespace_pids(self.node)
                if parent(p) == self.pid and is_worker(p)]

    def sample(self, warmup_s):
        rss, targets = rss_kib(self.pid), fd_targets(self.pid)
        if rss is None or targets is None or not self.is_running():
            return
        now = time.time()
        self.samples.append((now, rss, len(targets)))
        if now - self.started >= warmup_s:
            self.fds_last = targets
            if self.fds_first is None:
                self.fds_first = targets

    def output(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()
