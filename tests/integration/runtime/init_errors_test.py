"""ddp::init with a missing or malformed launcher variable: exit 2 and one line naming it."""

import ddptest

BASE = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "DDP_BACKEND": ""}


def expect(env_changes, needle):
    env = dict(BASE)
    env.update(env_changes)
    env = {k: v for k, v in env.items() if v is not None}
    # Start from a clean slate: the variables of an enclosing launcher must not leak in.
    for name in BASE:
        if name not in env:
            env[name] = ""
    result = ddptest.run([ddptest.bin_path("runtime_worker"), "ops", "1"], timeout=20, env=env)
    ddptest.check(result.returncode == 2,
                  f"{env_changes}: exit {result.returncode}, expected 2\n{result.stderr}")
    ddptest.check(needle in result.stderr, f"{env_changes}: {needle!r} not in:\n{result.stderr}")


expect({"RANK": None}, "environment variable RANK is not set")
expect({"WORLD_SIZE": "two"}, "environment variable WORLD_SIZE='two' is not an integer")
expect({"RANK": "3", "WORLD_SIZE": "2"}, "RANK=3 is not below WORLD_SIZE=2")
expect({"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is outside [1, 65535]")
expect({"DDP_BACKEND": "mpi"}, "environment variable DDP_BACKEND='mpi' is not a backend (gloo, nccl)")
expect({"DDP_STORE_DIALECT": "torch3"}, "DDP_STORE_DIALECT='torch3'")
print("PASS init errors")
