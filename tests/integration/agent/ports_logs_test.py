"""A taken --master_port is reported with the port; with no --master_port two jobs at once get
different free ports; --log_dir with --redirects and --tee writes per-attempt, per-rank files."""
import glob
import os
import socket

import agenttest
import ddptest


def busy_master_port(tmp):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        out = os.path.join(tmp, "busy"); os.mkdir(out)
        result = agenttest.launch([f"--master_port={port}", agenttest.worker("env_dump.py"), out],
                                  timeout=30)
    ddptest.check(result.returncode == 1, f"busy port: exit code {result.returncode}\n{result.stderr}")
    ddptest.check(str(port) in result.stderr, f"the error does not name port {port}:\n{result.stderr}")
    ddptest.check(result.stderr.count("\n") <= 3, f"more than a line or two:\n{result.stderr}")
    ddptest.check(os.listdir(out) == [], "workers started despite the busy port")


def given_master_port(tmp):
    port = ddptest.free_port()
    out = os.path.join(tmp, "given"); os.mkdir(out)
    result = agenttest.launch([f"--master_port={port}", "--nproc_per_node=2",
                               agenttest.worker("env_dump.py"), out], timeout=30)
    agenttest.expect_exit(result, 0, "--master_port given")
    ports = {r["env"]["MASTER_PORT"] for r in agenttest.env_dumps(out).values()}
    ddptest.check(ports == {str(port)}, f"MASTER_PORT {ports}, expected {port}")


def log_files(tmp):
    out = os.path.join(tmp, "logs"); os.mkdir(out)
    log_dir = os.path.join(tmp, "logdir")
    result = agenttest.launch(["--nproc_per_node=2", "--log_dir", log_dir, "--redirects=3",
                               "--tee=0:1", agenttest.worker("env_dump.py"), out], timeout=30)
    agenttest.expect_exit(result, 0, "--log_dir --redirects --tee")
    stdouts = sorted(glob.glob(os.path.join(log_dir, "*", "attempt_0", "*", "stdout.log")))
    ddptest.check(len(stdouts) == 2, f"stdout files: {stdouts}")
    for rank, path in enumerate(stdouts):
        ddptest.check(f"env_dump rank={rank} attempt=0" in open(path).read(),
                      f"{path}: {open(path).read()!r}")
    ddptest.check("env_dump rank=0" in result.stdout, f"rank 0 not teed:\n{result.stdout}")
    ddptest.check("env_dump rank=1" not in result.stdout, f"rank 1 not redirected:\n{result.stdout}")


def main():
    tmp = ddptest.temp_dir()
    try:
        busy_master_port(tmp)
        given_master_port(tmp)
        log_files(tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
