"""Shared helpers for ddprun's integration tests (stdlib only, run by /usr/bin/python3).

A test is a script that exits 0 on success, 1 on failure, and 77 when a requirement is missing
(ctest's SKIP_RETURN_CODE). Under DDP_REQUIRE_ALL=1 (scripts/test.sh) a missing requirement is a
failure instead of a skip.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
BIN_DIR = os.environ.get("DDP_BIN_DIR", os.path.join(os.path.dirname(__file__), "../../build/bin"))
SOURCE_DIR = os.environ.get("DDP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
TORCH_PYTHON = "/usr/bin/python3"


def bin_path(name):
    """Path of a built executable in build/bin (ddprun, ddp-store, test workers...)."""
    path = os.path.join(BIN_DIR, name)
    if not os.path.exists(path):
        fail(f"{path} is not built")
    return path


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def require(condition, reason):
    """Skips the test (exit 77) when `condition` is false, or fails under DDP_REQUIRE_ALL=1."""
    if condition:
        return
    if os.environ.get("DDP_REQUIRE_ALL") == "1":
        fail(f"requirement missing under DDP_REQUIRE_ALL=1: {reason}")
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def require_torch():
    ok = os.path.exists(TORCH_PYTHON) and subprocess.run(
        [TORCH_PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode == 0
    require(ok, f"{TORCH_PYTHON} cannot import torch (apt-get install python3-torch)")


def require_root():
    require(os.geteuid() == 0, "needs root (network namespaces)")


def free_port():
    """A port that was free a moment ago (tests only; ddprun itself never relies on this)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, timeout=60, env=None, check_rc=None, **kwargs):
    """Runs cmd to completion and returns CompletedProcess with text stdout/stderr.

    Kills the whole process group on timeout so nothing outlives the test.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        fail(f"timed out after {timeout}s: {' '.join(map(str, cmd))}\n--- stdout\n{out}\n--- stderr\n{err}")
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check_rc is not None and result.returncode != check_rc:
        fail(f"exit code {result.returncode}, expected {check_rc}: {' '.join(map(str, cmd))}\n"
             f"--- stdout\n{out}\n--- stderr\n{err}")
    return result


def spawn(cmd, env=None, **kwargs):
    """Starts cmd in its own session (so the test can signal or kill it as a group)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.Popen(cmd, env=full_env, start_new_session=True, **kwargs)


def processes_with_env(marker):
    """PIDs of live processes whose environment contains `marker` (e.g. "DDP_TEST_TAG=abc")."""
    pids = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat") as s:
                        if s.read().split(")")[-1].split()[0] != "Z":
                            pids.append(int(entry))
        except OSError:
            continue
    return pids


def wait_until(predicate, timeout, interval=0.02):
    """Polls predicate (tests only) until it is true or timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value


def temp_dir(prefix="ddptest_"):
    path = tempfile.mkdtemp(prefix=prefix)
    return path


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)
