"""Real OpenSSH servers in the netns nodes (scripts/netns-cluster.sh) for --hostfile tests.

`with SshCluster(nodes, sshd_on) as c:` brings nodes 1..nodes up and starts Debian's sshd in the
namespaces listed in `sshd_on`, each with a host key, client key, sshd_config, ssh_config and
known_hosts generated under a fresh temp dir; nothing of the machine's own ssh setup is read or
changed (the one shared path is /run/sshd, sshd's empty privilege-separation directory). On exit
every sshd and every process carrying the cluster's tag is killed and the nodes are removed.
"""

import os
import shutil
import signal
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../multinode"))

import ddptest  # noqa: E402
import netns_rig  # noqa: E402

SSHD = "/usr/sbin/sshd"


def require_ssh():
    netns_rig.require_rig()
    ok = os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")
    ddptest.require(ok, "needs openssh-server and openssh-client (apt-get install "
                        "openssh-server openssh-client)")


class SshCluster(netns_rig.Cluster):
    def __init__(self, nodes, sshd_on=None):
        super().__init__(nodes)
        self.sshd_on = list(range(1, nodes + 1)) if sshd_on is None else sshd_on
        self.dir = None
        self.sshds = []
        self.tag = f"DDP_TEST_TAG=hostfile-{uuid.uuid4().hex}"

    def __enter__(self):
        self.dir = ddptest.temp_dir("ddptest_ssh_")
        os.chmod(self.dir, 0o700)
        try:
            self._write_config()
            super().__enter__()
            for node in self.sshd_on:
                self._start_sshd(node)
            for node in self.sshd_on:
                self._wait_ready(node)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for p in self.sshds:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.kill_tagged()
        super().__exit__(*exc)
        ddptest.remove_tree(self.dir)
        return False

    def path(self, name):
        return os.path.join(self.dir, name)

    def _write_config(self):
        for key in ("host_key", "id"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.path(key)],
                           check=True, capture_output=True, timeout=30)
        shutil.copy(self.path("id.pub"), self.path("authorized_keys"))
        with open(self.path("host_key.pub")) as f:
            host_key = " ".join(f.read().split()[:2])
        with open(self.path("known_hosts"), "w") as f:
            for node in range(1, self.nodes + 1):
                f.write(f"{netns_rig.addr(node)} {host_key}\n")
        with open(self.path("sshd_config"), "w") as f:
            f.write(f"""Port 22
HostKey {self.path("host_key")}
AuthorizedKeysFile {self.path("authorized_keys")}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 100:30:200
MaxSessions 100
LogLevel ERROR
""")
        with open(self.path("ssh_config"), "w") as f:
            f.write(f"""Host *
  User root
  IdentityFile {self.path("id")}
  IdentitiesOnly yes
  UserKnownHostsFile {self.path("known_hosts")}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
""")

    def _start_sshd(self, node):
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        cmd = ["ip", "netns", "exec", f"ddpn{node}", SSHD, "-D", "-f", self.path("sshd_config"),
               "-o", f"PidFile={self.path(f'sshd{node}.pid')}", "-E",
               self.path(f"sshd{node}.log")]
        self.sshds.append(subprocess.Popen(cmd, start_new_session=True))

    def _wait_ready(self, node):
        def listening():
            r = subprocess.run(["ip", "netns", "exec", f"ddpn{node}", "ss", "-Hltn", "sport = :22"],
                               capture_output=True, text=True)
            return r.stdout.strip() != ""
        if not ddptest.wait_until(listening, 20):
            with open(self.path(f"sshd{node}.log")) as f:
                ddptest.fail(f"sshd in node {node} did not listen within 20 s: {f.read()}")

    def ssh_command(self):
        """The --ssh value for ddprun: ssh with this cluster's own config."""
        return f"ssh -F {self.path('ssh_config')}"

    def hostfile(self, lines):
        path = self.path("hostfile")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def launch(self, args, env=None):
        """Starts the local `ddprun --ssh ... args` (in the root namespace) with the tag; the
        tag and every variable of `env` are exported to the hosts."""
        full_env = {"DDP_TEST_TAG": self.tag.split("=", 1)[1]}
        full_env.update(env or {})
        exports = ",".join(k for k in full_env if not k.startswith(("NCCL_", "GLOO_")))
        cmd = [ddptest.bin_path("ddprun"), "--ssh", self.ssh_command(), "--export", exports,
               *args]
        p = ddptest.spawn(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
        self.agents.append(p)
        return p

    def tagged(self):
        return ddptest.processes_with_env(self.tag)

    def kill_tagged(self):
        for pid in self.tagged():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
