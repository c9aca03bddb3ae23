"""`ddprun --hostfile` without sshd or root: the errors a user meets before any connection, the
dry run, and the fan-out itself with `--ssh` set to a local stand-in for ssh (`sh -c 'exec sh -c
"$1"' HOST COMMAND`, which runs each host's command on this machine), so the supervisor's output
prefixes, exit codes and signal forwarding are checked wherever the tests run."""

import os
import signal
import subprocess

import ddptest
from ddptest import check

WORKERS = os.path.join(ddptest.SOURCE_DIR, "tests/integration/workers")
LOCAL_SSH = "sh -c 'exec sh -c \"$1\"'"


def ddprun(args, env=None, timeout=30):
    return ddptest.run([ddptest.bin_path("ddprun"), *args], timeout=timeout, env=env)


def errors(tmp):
    missing = os.path.join(tmp, "missing")
    r = ddprun(["--hostfile", missing, "t.py"])
    check(r.returncode == 2 and r.stderr.strip() ==
          f"ddprun: error: --hostfile: cannot read {missing}: No such file or directory",
          f"unreadable file: {r.returncode} {r.stderr}")
    dup = os.path.join(tmp, "dup")
    with open(dup, "w") as f:
        f.write("a slots=2\nb\na\n")
    r = ddprun(["t.py"], env={"PET_HOSTFILE": dup})
    check(r.returncode == 2 and r.stderr.strip() ==
          "ddprun: error: PET_HOSTFILE: host a is listed twice (lines 1 and 3)",
          f"duplicate: {r.returncode} {r.stderr}")
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        f.write("a slots=2\nb\n")
    r = ddprun(["--hostfile", hosts, "--ssh", "no-such-ssh -p 2", "t.py"])
    check(r.returncode == 2 and r.stderr.strip() ==
          "ddprun: error: --ssh: 'no-such-ssh' is not a program found here",
          f"bad --ssh: {r.returncode} {r.stderr}")
    r = ddprun(["--hostfile", hosts, "--dry_run", "t.py"])
    check(r.returncode == 0 and "# host b: node_rank=1 nproc_per_node=1\nssh -o BatchMode=yes b "
          in r.stdout, f"dry run: {r.stdout}")
    print("ok errors (unreadable file, duplicate host, bad --ssh) and --dry_run")


def local_fanout(tmp):
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 slots=2\nlocalhost slots=1\n")
    out_dir = ddptest.temp_dir()
    tag = f"DDP_TEST_TAG=hostfile-local-{os.getpid()}"
    args = [ddptest.bin_path("ddprun"), "--hostfile", hosts, "--ssh", LOCAL_SSH,
            f"--master_port={ddptest.free_port()}", "--export", "DDP_TEST_TAG",
            "--python", "/usr/bin/python3", "--log_level=info"]
    env = {"DDP_TEST_TAG": tag.split("=", 1)[1]}
    try:
        r = ddptest.run(args + [os.path.join(WORKERS, "env_dump.py"), out_dir], env=env)
        check(r.returncode == 0, f"local fan-out: exit {r.returncode}\n{r.stderr}")
        for line in ("[127.0.0.1:0]: env_dump rank=0 attempt=0",
                     "[127.0.0.1:1]: env_dump rank=1 attempt=0",
                     "[localhost:2]: env_dump rank=2 attempt=0"):
            check(line in r.stdout.splitlines(), f"no '{line}' in\n{r.stdout}")
        check("[localhost]: [ddprun] [info]" in r.stderr, f"agent lines unprefixed\n{r.stderr}")

        r = ddptest.run(args + [os.path.join(WORKERS, "fail_once.py"), out_dir, "--rank", "2",
                                "--code", "9", "--lines", "1"], env=env)
        check(r.returncode == 9, f"failure: exit {r.returncode}, expected 9\n{r.stderr}")

        p = ddptest.spawn(args + [os.path.join(WORKERS, "trap_term.py"), out_dir], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = lambda: all(os.path.exists(os.path.join(out_dir, f"ready_rank{r}"))
                            for r in range(3))
        check(ddptest.wait_until(ready, 30), "SIGINT: workers not ready")
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 130, f"SIGINT: exit {p.returncode}\n{err}")
        for rank in range(3):
            with open(os.path.join(out_dir, f"signal_rank{rank}")) as f:
                check("SIGINT" in f.read(), f"SIGINT: rank {rank} got none")
        check(ddptest.wait_until(lambda: not ddptest.processes_with_env(tag), 20),
              "SIGINT: processes left")
        print("ok fan-out through a local ssh stand-in: prefixes, exit 9 from rank 2, SIGINT 130")
    finally:
        for pid in ddptest.processes_with_env(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        ddptest.remove_tree(out_dir)


tmp = ddptest.temp_dir()
try:
    errors(tmp)
    local_fanout(tmp)
finally:
    ddptest.remove_tree(tmp)
