"""Launching runtime_worker for the runtime tests: under a real `ddprun --nproc_per_node=N` when
it is built, else the way ddprun would (a `ddp-store serve` store and the launcher's variables set
by hand, restarts included), so the same scenarios run either way."""

import os
import subprocess

import ddptest

MIB = 1 << 20


def have_ddprun():
    return os.path.exists(os.path.join(ddptest.BIN_DIR, "ddprun"))


def launch(nproc, worker_args, max_restarts=0, timeout=90, env=None, program=None):
    """Runs program (default runtime_worker) on nproc ranks; returns (exit code, output)."""
    worker = program or ddptest.bin_path("runtime_worker")
    if have_ddprun():
        cmd = [ddptest.bin_path("ddprun"), f"--nproc_per_node={nproc}",
               f"--max_restarts={max_restarts}", "--monitor_interval=0.1", "--no_python",
               worker] + worker_args
        result = ddptest.run(cmd, timeout=timeout, env=env)
        return result.returncode, result.stdout + result.stderr
    return _launch_by_hand(nproc, worker, worker_args, max_restarts, timeout, env)


def _launch_by_hand(nproc, worker, worker_args, max_restarts, timeout, env):
    store = ddptest.spawn([ddptest.bin_path("ddp-store"), "serve", "--host", "127.0.0.1",
                           "--port", "0"], stdout=subprocess.PIPE, text=True)
    output = []
    try:
        line = store.stdout.readline()
        ddptest.check(line.startswith("listening on "), f"ddp-store serve printed {line!r}")
        port = line.strip().rsplit(":", 1)[1]
        for attempt in range(max_restarts + 1):
            code = _run_attempt(nproc, worker, worker_args, port, attempt, timeout, env, output)
            if code == 0:
                return 0, "".join(output)
        return code, "".join(output)
    finally:
        store.kill()
        store.wait()


def _run_attempt(nproc, worker, worker_args, port, attempt, timeout, env, output):
    """One attempt: all ranks, stopped together when one fails (as the agent does)."""
    procs = []
    for rank in range(nproc):
        worker_env = dict(env or {})
        worker_env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
                           "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0",
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                           "TORCHELASTIC_USE_AGENT_STORE": "True",
                           "TORCHELASTIC_RESTART_COUNT": str(attempt)})
        procs.append(ddptest.spawn([worker] + worker_args, env=worker_env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True))
    failed = None
    try:
        import time
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in procs) and failed is None:
            ddptest.check(time.monotonic() < deadline, f"workers still running after {timeout}s")
            failed = next((p.returncode for p in procs if p.poll() not in (None, 0)), None)
            time.sleep(0.02)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for rank, p in enumerate(procs):
            out, _ = p.communicate()
            output.append("".join(f"[{rank}]: {l}\n" for l in out.splitlines()))
    return failed if failed is not None else max(p.returncode for p in procs)
