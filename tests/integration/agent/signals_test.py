"""Signals: SIGTERM to ddprun reaches every worker and ddprun exits 143; a worker that ignores it
is SIGKILLed after --shutdown_timeout; SIGKILL to ddprun leaves no worker and no grandchild alive
after one second."""
import os
import signal
import time

import agenttest
import ddptest


def ready(out, nproc, prefix):
    return all(os.path.exists(os.path.join(out, f"{prefix}_rank{r}")) for r in range(nproc))


def sigterm_forwarded(tmp, extra_args, what):
    out = os.path.join(tmp, what); os.mkdir(out)
    proc = ddptest.spawn([agenttest.ddprun(), "--python", agenttest.PYTHON, "--nproc_per_node=3"]
                         + extra_args + [agenttest.worker("trap_term.py"), out],
                         stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    try:
        ddptest.check(ddptest.wait_until(lambda: ready(out, 3, "ready"), 20),
                      f"{what}: workers never became ready")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    ddptest.check(rc == 128 + signal.SIGTERM, f"{what}: ddprun exit code {rc}, expected 143")
    for rank in range(3):
        path = os.path.join(out, f"signal_rank{rank}")
        ddptest.check(os.path.exists(path) and "SIGTERM" in open(path).read(),
                      f"{what}: rank {rank} did not receive SIGTERM")


def sigkill_leaves_nothing(tmp):
    out = os.path.join(tmp, "kill"); os.mkdir(out)
    tag = agenttest.unique_tag()
    proc = ddptest.spawn([agenttest.ddprun(), "--python", agenttest.PYTHON, "--nproc_per_node=2",
                          agenttest.worker("spawn_grandchild.py"), out],
                         env={"DDP_TEST_TAG": tag},
                         stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
    try:
        ddptest.check(ddptest.wait_until(lambda: ready(out, 2, "pids"), 20),
                      "grandchildren never started")
        ddptest.check(len(ddptest.processes_with_env(f"DDP_TEST_TAG={tag}")) >= 5,
                      "expected ddprun, 2 workers and 2 grandchildren")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        killed_at = time.monotonic()
        gone = ddptest.wait_until(lambda: not ddptest.processes_with_env(f"DDP_TEST_TAG={tag}"), 1.0)
        left = ddptest.processes_with_env(f"DDP_TEST_TAG={tag}")
        ddptest.check(gone, f"alive {time.monotonic() - killed_at:.2f}s after SIGKILL: {left}")
    finally:
        for pid in ddptest.processes_with_env(f"DDP_TEST_TAG={tag}"):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def main():
    tmp = ddptest.temp_dir()
    try:
        sigterm_forwarded(tmp, [], "sigterm")
        # A worker that ignores SIGTERM is killed after the grace period; ddprun still exits 143.
        out = os.path.join(tmp, "ignore"); os.mkdir(out)
        proc = ddptest.spawn([agenttest.ddprun(), "--python", agenttest.PYTHON,
                              "--nproc_per_node=2", "--shutdown_timeout=1",
                              agenttest.worker("trap_term.py"), out, "--ignore"],
                             stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
        try:
            ddptest.check(ddptest.wait_until(lambda: ready(out, 2, "ready"), 20), "not ready")
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        ddptest.check(rc == 128 + signal.SIGINT, f"ignoring workers: exit code {rc}, expected 130")
        ddptest.check("SIGINT" in open(os.path.join(out, "signal_rank0")).read(),
                      "SIGINT was not forwarded as SIGINT")
        sigkill_leaves_nothing(tmp)
    finally:
        ddptest.remove_tree(tmp)


if __name__ == "__main__":
    main()
    print("ok")
