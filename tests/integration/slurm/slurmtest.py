"""Shared pieces of the SLURM integration tests: the requirements, one test cluster per script
(scripts/slurm/cluster-up.sh, always stopped again), and waiting on jobs without `sbatch --wait`."""
import contextlib
import os
import subprocess
import time

import ddptest

SCRIPTS = os.path.join(ddptest.SOURCE_DIR, "scripts", "slurm")
HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(ddptest.SOURCE_DIR, "tests", "integration", "workers")
ENV = {"SLURM_CONF": "/run/ddp-slurm/slurm.conf"}
HOST_ADDR = "10.214.0.1"    # the root namespace on the cluster's bridge (cluster-env.sh)
NODE0_ADDR = "10.214.0.10"  # ddpslurm0


def require_slurm():
    ddptest.require_root()
    ddptest.require(subprocess.call(["sh", "-c", "command -v slurmctld slurmd srun munged"],
                                    stdout=subprocess.DEVNULL) == 0,
                    "SLURM not installed (scripts/setup.sh installs slurmctld, slurmd, "
                    "slurm-client and munge)")


@contextlib.contextmanager
def cluster(nodes=2):
    """Starts a cluster of `nodes` namespace nodes and stops it on leaving, even on failure."""
    try:
        ddptest.run([os.path.join(SCRIPTS, "cluster-up.sh"), str(nodes)], timeout=60, check_rc=0)
        yield
    finally:
        subprocess.run([os.path.join(SCRIPTS, "cluster-down.sh")], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)


def slurm(cmd, timeout=30, check_rc=None):
    """Runs a SLURM client command against the test cluster."""
    return ddptest.run(cmd, timeout=timeout, env=ENV, check_rc=check_rc)


def job_id(name, timeout=20):
    """The id of the (one) job named `name`, once squeue shows it RUNNING."""
    found = ddptest.wait_until(
        lambda: slurm(["squeue", "-h", "-n", name, "-t", "RUNNING", "-o", "%i"]).stdout.strip(),
        timeout=timeout, interval=0.1)
    ddptest.check(found, f"job {name} is not running after {timeout}s")
    return found.split()[0]


def job_field(job, field):
    """A field of `scontrol show job` (kept MinJobAge=60 s after the end), or None."""
    out = slurm(["scontrol", "-o", "show", "job", job]).stdout
    for item in out.split():
        if item.startswith(field + "="):
            return item[len(field) + 1:]
    return None


def wait_job_end(job, timeout):
    """Polls until the job has ended (never `sbatch --wait`: it returns tens of seconds late);
    returns (JobState, ExitCode)."""
    state = ddptest.wait_until(
        lambda: (job_field(job, "JobState") or "GONE") not in ("PENDING", "CONFIGURING", "RUNNING",
                                                               "COMPLETING"),
        timeout=timeout, interval=0.2)
    ddptest.check(state, f"job {job} did not end within {timeout}s")
    return job_field(job, "JobState"), job_field(job, "ExitCode")


def wait_files(directory, names, timeout):
    """Waits until every file in `names` exists under `directory`; fails naming the missing."""
    paths = [os.path.join(directory, n) for n in names]
    ddptest.wait_until(lambda: all(os.path.exists(p) for p in paths), timeout=timeout,
                       interval=0.05)
    missing = [n for n, p in zip(names, paths) if not os.path.exists(p)]
    ddptest.check(not missing, f"not written within {timeout}s: {missing}")


def wait_gone(marker, timeout):
    """Seconds until no live process carries `marker` in its environment; fails after timeout."""
    start = time.monotonic()
    left = ddptest.wait_until(lambda: not ddptest.processes_with_env(marker), timeout=timeout)
    ddptest.check(left, f"processes with {marker} still alive after {timeout}s: "
                        f"{describe(ddptest.processes_with_env(marker))}")
    return time.monotonic() - start


def describe(pids):
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{pid}: {cmdline[:120]}")
        except OSError:
            out.append(f"{pid}: gone")
    return out
