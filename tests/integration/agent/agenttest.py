"""Helpers shared by the agent's integration tests: where ddprun and the test workers are, and
reading what the workers wrote."""
import glob
import json
import os
import sys
import uuid

import ddptest

WORKERS = os.path.join(ddptest.SOURCE_DIR, "tests", "integration", "workers")
PYTHON = sys.executable  # any Python 3 runs the stdlib workers


def ddprun():
    return ddptest.bin_path("ddprun")


def worker(name):
    return os.path.join(WORKERS, name)


def launch(args, timeout=60, env=None, **kwargs):
    """Runs `ddprun --python <python> args` to completion (CompletedProcess, text output)."""
    return ddptest.run([ddprun(), "--python", PYTHON] + args, timeout=timeout, env=env, **kwargs)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def env_dumps(out_dir, attempt=None):
    """{rank: record} of the env_rank<R>_attempt<N>.json files (of one attempt, when given)."""
    pattern = f"env_rank*_attempt{'*' if attempt is None else attempt}.json"
    records = {}
    for path in glob.glob(os.path.join(out_dir, pattern)):
        record = read_json(path)
        records[int(record["env"]["RANK"])] = record
    return records


def unique_tag():
    """An environment marker to find leftover processes: DDP_TEST_TAG=<uuid>."""
    return f"ddptest-{uuid.uuid4()}"


def expect_exit(result, code, what):
    ddptest.check(result.returncode == code,
                  f"{what}: exit code {result.returncode}, expected {code}\n--- stdout\n"
                  f"{result.stdout}\n--- stderr\n{result.stderr}")
