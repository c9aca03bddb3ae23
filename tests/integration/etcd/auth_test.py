"""etcd's user/password authentication (--rdzv_conf user=,password_file=, docs/security.md) on a
real 3-member etcd 3.4 cluster with auth enabled: two agents with the root user's password form
a job with ranks 0..1; an agent with a wrong password stops within its join timeout with one
error line naming the user; a password file others may read is refused before anything starts."""

import glob
import json
import os
import subprocess
import sys

import ddptest
import etcdtest
from ddptest import check

WORKER = [sys.executable, os.path.join(ddptest.SOURCE_DIR, "tests/integration/workers/env_dump.py")]
PASSWORD = "etcd-root-password-31"


def etcdctl(endpoints, *args, user=None):
    cmd = ["etcdctl", "--endpoints", endpoints, *args]
    if user:
        cmd[1:1] = ["--user", user]
    subprocess.run(cmd, check=True, capture_output=True, timeout=30,
                   env=dict(os.environ, ETCDCTL_API="3"))


def secret_file(work, name, text, mode):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text + "\n")
    os.chmod(path, mode)
    return path


work = ddptest.temp_dir("ddptest_etcd_auth_")
try:
    with etcdtest.Cluster() as cluster:
        etcdctl(cluster.endpoints, "user", "add", f"root:{PASSWORD}", "--interactive=false")
        etcdctl(cluster.endpoints, "auth", "enable")
        good = secret_file(work, "root.password", PASSWORD, 0o600)
        out_dir = os.path.join(work, "job")
        os.makedirs(out_dir)
        conf = f"user=root,password_file={good},join_timeout=60"
        cmds = [etcdtest.agent_cmd(cluster.endpoints, "auth", 2, 1, WORKER + [out_dir], conf=conf)
                for _ in range(2)]
        procs, logs = etcdtest.spawn_agents(cmds, work, "agent")
        codes = etcdtest.wait_all(procs, 90)
        check(codes == [0, 0], f"agents exited {codes}\n" +
              "\n".join(open(p).read()[-2000:] for p in logs))
        envs = [json.load(open(f))["env"] for f in glob.glob(os.path.join(out_dir, "env_rank*.json"))]
        check(sorted(int(e["RANK"]) for e in envs) == [0, 1], f"ranks: {envs}")
        print("ok two agents authenticated as root form a job")

        wrong = secret_file(work, "wrong.password", "not-the-password", 0o600)
        result = ddptest.run(etcdtest.agent_cmd(cluster.endpoints, "auth2", 2, 1, ["/bin/true"],
                                                conf=f"user=root,password_file={wrong},"
                                                     "join_timeout=20",
                                                extra=["--no_python"]), timeout=40)
        errors = [l for l in result.stderr.splitlines() if "error" in l]
        check(result.returncode != 0 and len(errors) == 1
              and "--rdzv_conf user=root: etcd refused it" in errors[0]
              and "authentication failed" in errors[0],
              f"wrong password: exit {result.returncode}\n{result.stderr}")
        print("ok a wrong password stops the agent with one line naming the user")

        readable = secret_file(work, "open.password", PASSWORD, 0o644)
        result = ddptest.run(etcdtest.agent_cmd(cluster.endpoints, "auth3", 1, 1, ["/bin/true"],
                                                conf=f"user=root,password_file={readable}",
                                                extra=["--no_python"]), timeout=30)
        check(result.returncode == 2 and "--rdzv_conf password_file=" in result.stderr
              and "mode 0644" in result.stderr, f"readable file: {result.stderr}")
        print("ok a password file others may read is refused")
finally:
    ddptest.remove_tree(work)
