"""ddprun gives N workers torchrun's environment, runs .py, -m, --no_python and executable entries with their
arguments untouched, and --dry_run starts nothing."""
import os

import agenttest
import ddptest

ARGS = ["--lr", "0.1", "a b", "$HOME", "--", "-m", "--nproc_per_node=9", ""]


def check_env(records, nproc, what):
    ddptest.check(sorted(records) == list(range(nproc)), f"{what}: ranks {sorted(records)}")
    ports = {r["env"]["MASTER_PORT"] for r in records.values()}
    ddptest.check(len(ports) == 1, f"{what}: MASTER_PORT differs across workers: {ports}")
    port = int(ports.pop())
    ddptest.check(0 < port < 65536, f"{what}: MASTER_PORT {port}")
    for rank, record in records.items():
        env = record["env"]
        expected = {
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
            "ROLE_NAME": "default", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(nproc),
            "MASTER_ADDR": "127.0.0.1", "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "none",
            "TORCHELASTIC_USE_AGENT_STORE": "True", "NCCL_ASYNC_ERROR_HANDLING": "1",
            "OMP_NUM_THREADS": "1", "DDP_TEST_INHERITED": "yes",
        }
        for key, value in expected.items():
            ddptest.check(env.get(key) == value,
                          f"{what}: rank {rank} {key}={env.get(key)!r}, expected {value!r}")
        error_file = env.get("TORCHELASTIC_ERROR_FILE", "")
        ddptest.check(error_file.endswith(f"attempt_0/{rank}/error.json"),
                      f"{what}: TORCHELASTIC_ERROR_FILE={error_file}")
        ddptest.check(record["argv"][2:] == ARGS, f"{what}: argv {record['argv']}")


def main():
    tmp = ddptest.temp_dir()
    try:
        os.environ.pop("OMP_NUM_THREADS", None)  # so ddprun sets it (and warns)
        base_env = {}

        # .py entry, 3 workers
        out = os.path.join(tmp, "py"); os.mkdir(out)
        result = ddptest.run([agenttest.ddprun(), "--python", agenttest.PYTHON,
                              "--nproc_per_node=3", agenttest.worker("env_dump.py"), out] + ARGS,
                             env={**base_env, "DDP_TEST_INHERITED": "yes"}, timeout=60)
        agenttest.expect_exit(result, 0, ".py entry")
        check_env(agenttest.env_dumps(out), 3, ".py entry")
        ddptest.check("Setting OMP_NUM_THREADS" in result.stderr,
                      f"no OMP_NUM_THREADS warning:\n{result.stderr}")

        # -m entry, 2 workers (PYTHONPATH finds the package)
        out = os.path.join(tmp, "module"); os.mkdir(out)
        result = ddptest.run([agenttest.ddprun(), "--python", agenttest.PYTHON,
                              "--nproc-per-node", "2", "-m", "ddptest_workers.env_dump", out] + ARGS,
                             env={**base_env, "DDP_TEST_INHERITED": "yes",
                                  "PYTHONPATH": agenttest.WORKERS}, timeout=60)
        agenttest.expect_exit(result, 0, "-m entry")
        check_env(agenttest.env_dumps(out), 2, "-m entry")

        # --no_python entry: the interpreter is the command
        out = os.path.join(tmp, "nopy"); os.mkdir(out)
        result = ddptest.run([agenttest.ddprun(), "--nproc_per_node=2", "--no_python",
                              agenttest.PYTHON, agenttest.worker("env_dump.py"), out] + ARGS,
                             env={**base_env, "DDP_TEST_INHERITED": "yes"}, timeout=60)
        agenttest.expect_exit(result, 0, "--no_python entry")
        records = agenttest.env_dumps(out)
        ddptest.check(sorted(records) == [0, 1], f"--no_python ranks {sorted(records)}")
        for record in records.values():
            ddptest.check(record["argv"][2:] == ARGS, f"--no_python argv {record['argv']}")

        # an executable entry that is not a .py file runs as given, without --no_python
        out = os.path.join(tmp, "exe"); os.mkdir(out)
        result = ddptest.run([agenttest.ddprun(), "--nproc_per_node=2",
                              agenttest.PYTHON, agenttest.worker("env_dump.py"), out] + ARGS,
                             env={**base_env, "DDP_TEST_INHERITED": "yes"}, timeout=60)
        agenttest.expect_exit(result, 0, "executable entry")
        records = agenttest.env_dumps(out)
        ddptest.check(sorted(records) == [0, 1], f"executable entry ranks {sorted(records)}")

        # --dry_run prints the command lines and starts nothing
        out = os.path.join(tmp, "dry"); os.mkdir(out)
        result = ddptest.run([agenttest.ddprun(), "--python", agenttest.PYTHON,
                              "--nproc_per_node=2", "--dry_run",
                              agenttest.worker("env_dump.py"), out], env=base_env, timeout=30)
        agenttest.expect_exit(result, 0, "--dry_run")
        ddptest.check("env_dump.py" in result.stdout and "RANK" in result.stdout,
                      f"--dry_run output:\n{result.stdout}")
        ddptest.check(os.listdir(out) == [], f"--dry_run started workers: {os.listdir(out)}")

        # a bad flag: one line naming it, exit 2
        result = ddptest.run([agenttest.ddprun(), "--nproc_per_node=zero", "x.py"], timeout=30)
        agenttest.expect_exit(result, 2, "bad --nproc_per_node")
        ddptest.check("--nproc_per_node" in result.stderr, f"message: {result.stderr}")

        # a program that does not exist: an error naming it, not a hang
        result = ddptest.run([agenttest.ddprun(), "--no_python", "/nonexistent/prog"], timeout=30)
        ddptest.check(result.returncode != 0 and "/nonexistent/prog" in result.stderr,
                      f"missing program: rc={result.returncode}\n{result.stderr}")
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
