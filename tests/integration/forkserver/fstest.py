"""Helpers of the forkserver tests: ddprun with /usr/bin/python3 (PyTorch) workers, exec or
forkserver, and the probe worker's records."""
import glob
import json
import os
import signal
import subprocess

import ddptest

WORKERS = os.path.join(ddptest.SOURCE_DIR, "tests", "integration", "workers")
PROBE = os.path.join(WORKERS, "forkserver_probe.py")
FORKSERVER = ["--start_method=forkserver"]


def ddprun_cmd(args):
    return [ddptest.bin_path("ddprun"), "--python", ddptest.TORCH_PYTHON] + args


def launch(args, timeout=90, env=None, cwd=None):
    """Runs ddprun to completion; returns (CompletedProcess, ddprun's pid)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen(ddprun_cmd(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=full_env, cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        ddptest.fail(f"timed out: {args}\n--- stdout\n{out}\n--- stderr\n{err}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err), proc.pid


def expect_exit(result, code, what):
    ddptest.check(result.returncode == code,
                  f"{what}: exit code {result.returncode}, expected {code}\n--- stdout\n"
                  f"{result.stdout}\n--- stderr\n{result.stderr}")


def probes(directory, attempt=0):
    """{rank: record} of the probe files of one attempt."""
    records = {}
    for path in glob.glob(os.path.join(directory, f"probe_rank*_attempt{attempt}.json")):
        with open(path) as f:
            record = json.load(f)
        records[int(record["env"]["RANK"])] = record
    return records


def worker(name):
    return os.path.join(WORKERS, name)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def env_dumps(directory, attempt):
    """{rank: record} of fail_once.py's env_rank<R>_attempt<N>.json files."""
    records = {}
    for path in glob.glob(os.path.join(directory, f"env_rank*_attempt{attempt}.json")):
        record = read_json(path)
        records[int(record["env"]["RANK"])] = record
    return records


def ready_lines(stderr):
    return [line for line in stderr.splitlines() if "forkserver ready" in line]
