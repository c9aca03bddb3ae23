"""Issue 21, what a torchrun user meets first, as a user hits it with the real ddprun:
ddprun-launch with a legacy --local_rank script (with and without --use_env), the interpreter named
when it lacks a module, a quiet happy run, no temporary directory left behind, a later self-crash
in the report, static waiting progress, --version, and --numa_binding read back from
/proc/<pid>/status against a fake sysfs topology."""
import os
import subprocess
import sys
import textwrap

import agenttest
import ddptest
from ddptest import check

LEGACY_SCRIPT = textwrap.dedent("""\
    import argparse, os, sys
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", "--local-rank", type=int, required=True)
    parser.add_argument("--lr", type=float)
    args = parser.parse_args()
    with open(os.path.join(sys.argv[0] + ".out", f"rank{os.environ['RANK']}"), "w") as f:
        f.write(f"{args.local_rank} {os.environ['LOCAL_RANK']} {args.lr}")
    """)

USE_ENV_SCRIPT = LEGACY_SCRIPT.replace("required=True", "default=-1")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def quiet_env(**extra):
    """ddprun's environment without SPDLOG_LEVEL (it sets the log level) and OMP_NUM_THREADS (its
    absence brings the banner)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPDLOG_LEVEL", "OMP_NUM_THREADS")}
    env.update(extra)
    return env


def run_quiet(args, **extra_env):
    return subprocess.run([agenttest.ddprun()] + args, capture_output=True, text=True, timeout=60,
                          env=quiet_env(**extra_env), start_new_session=True)


def legacy_launch(work):
    """ddprun-launch passes --local_rank=N first (argparse requires it), or nothing with --use_env."""
    launcher = ddptest.bin_path("ddprun-launch")
    for name, script, extra, want in [
            ("legacy", LEGACY_SCRIPT, [], ["0 0 0.5", "1 1 0.5"]),
            ("use_env", USE_ENV_SCRIPT, ["--use_env"], ["-1 0 0.5", "-1 1 0.5"])]:
        path = write(os.path.join(work, f"{name}.py"), script)
        os.makedirs(path + ".out")
        result = ddptest.run([launcher, "--nproc_per_node=2", "--python", ddptest.TORCH_PYTHON]
                             + extra + [path, "--lr", "0.5"], timeout=60)
        agenttest.expect_exit(result, 0, f"ddprun-launch {name}")
        got = [open(os.path.join(path + ".out", f"rank{r}")).read() for r in (0, 1)]
        check(got == want, f"{name}: workers saw {got}, expected {want}")
    result = ddptest.run([agenttest.ddprun(), "--use_env", "x.py"])
    check(result.returncode == 2 and "ddprun-launch" in result.stderr,
          f"ddprun --use_env must name ddprun-launch: {result.stderr}")
    print("ok ddprun-launch: --local_rank=N before the script's args, none with --use_env")


def interpreter_named(work):
    """A worker whose interpreter lacks the module it imports: the report names that interpreter."""
    python = subprocess.run(["sh", "-c", "command -v python3"], capture_output=True,
                            text=True).stdout.strip()
    has_torch = subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0
    module = "ddprun_no_such_module" if has_torch else "torch"
    script = write(os.path.join(work, "needs_module.py"), f"import {module}\n")
    result = run_quiet([script], PYTHON_EXEC="")  # python3 from PATH, ddprun's default
    agenttest.expect_exit(result, 1, "a worker lacking a module")
    real = os.path.realpath(python) if "/" in python else python
    check(f"cannot import '{module}'" in result.stderr and "--python=" in result.stderr
          and "PYTHON_EXEC=" in result.stderr, f"no interpreter hint:\n{result.stderr}")
    check(python in result.stderr or real in result.stderr,
          f"the report does not name {python}:\n{result.stderr}")
    print(f"ok the report names {python} when it lacks {module}")


def quiet_and_clean(work):
    """A happy two-worker run prints only the OMP banner, and leaves nothing in $TMPDIR."""
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp)
    script = write(os.path.join(work, "ok.py"), "print('hello')\n")
    result = run_quiet(["--nproc_per_node=2", "--python", sys.executable, script], TMPDIR=tmp)
    agenttest.expect_exit(result, 0, "a happy run")
    stars = "*" * 41
    check(result.stderr.startswith(stars + "\nSetting OMP_NUM_THREADS") and
          result.stderr.endswith("as needed.\n" + stars + "\n") and
          result.stderr.count("\n") == 3, f"stderr is not just the OMP banner:\n{result.stderr}")
    check(result.stdout == "hello\nhello\n", f"stdout: {result.stdout!r}")
    check(os.listdir(tmp) == [], f"left in TMPDIR: {os.listdir(tmp)}")
    verbose = run_quiet(["--log_level=info", "--python", sys.executable, script], TMPDIR=tmp)
    check("[ddprun] [info] [agent] workers started" in verbose.stderr,
          f"--log_level=info shows no info lines:\n{verbose.stderr}")
    check(os.listdir(tmp) == [], f"left in TMPDIR: {os.listdir(tmp)}")
    failing = write(os.path.join(work, "fails.py"), "import sys; sys.exit(3)\n")
    result = run_quiet(["--redirects=3", "--python", sys.executable, failing], TMPDIR=tmp)
    kept = os.listdir(tmp)
    check(len(kept) == 1 and "logs kept in " + os.path.join(tmp, kept[0]) in result.stderr,
          f"logs of a failed run must stay and be named: {kept}\n{result.stderr}")
    print("ok quiet happy run; temporary directory removed, kept and named when it holds logs")


def later_self_crash(work):
    """Rank 1 exits 7 on its own while the agent stops it: listed among the other failures."""
    script = ("trap 'exit 7' TERM; if [ \"$RANK\" = 0 ]; then "
              "while [ ! -e \"$0.ready\" ]; do sleep 0.02; done; exit 3; fi; "
              "touch \"$0.ready\"; while :; do sleep 0.02; done")
    marker = os.path.join(work, "crash")
    result = run_quiet(["--nproc_per_node=2", "--no_python", "/bin/sh", "-c", script, marker])
    agenttest.expect_exit(result, 3, "root cause exit 3")
    check("<NO_OTHER_FAILURES>" not in result.stderr and
          "rank 1 (local_rank: 1) exitcode 7" in result.stderr,
          f"the later failure of rank 1 is not listed:\n{result.stderr}")
    print("ok a rank that failed after the root cause is listed")


def static_progress():
    """Node 0 of two waits for node 1 and says so at the default level, naming it."""
    port = ddptest.free_port()
    result = run_quiet(["--nnodes=2", "--node_rank=0", f"--master_port={port}",
                        "--rdzv_conf=timeout=2", "--no_python", "true"])
    check(result.returncode == 1, f"exit {result.returncode}: {result.stderr}")
    check("waiting for the nodes of --nnodes=2 to join round 0" in result.stderr and
          "(missing node_rank 1)" in result.stderr, f"no progress line:\n{result.stderr}")
    print("ok static waiting progress")


def version():
    result = run_quiet(["--version"])
    check(result.returncode == 0 and result.stdout.startswith("ddprun "), f"{result}")
    result = run_quiet(["--bogus", "x.py"])
    check(result.returncode == 2 and result.stderr.rstrip().endswith("(see ddprun --help)"),
          f"{result.stderr}")
    print("ok --version; unknown options point at --help")


def numa_binding(work):
    """Two NUMA nodes of one CPU each (a fake sysfs): each worker is bound to its node's CPU."""
    allowed = os.sched_getaffinity(0)
    ddptest.require({0, 1} <= allowed, f"needs CPUs 0 and 1 (this process may use {allowed})")
    root = os.path.join(work, "sys")
    for node in (0, 1):
        os.makedirs(os.path.join(root, f"devices/system/node/node{node}"))
        write(os.path.join(root, f"devices/system/node/node{node}/cpulist"), f"{node}\n")
    out = os.path.join(work, "numa")
    os.makedirs(out)
    script = write(os.path.join(work, "affinity.py"), textwrap.dedent("""\
        import os, sys
        with open(f"/proc/{os.getpid()}/status") as f:
            line = [l for l in f if l.startswith("Cpus_allowed_list")][0]
        with open(os.path.join(sys.argv[1], os.environ["RANK"]), "w") as f:
            f.write(line.split(":")[1].strip())
        """))
    result = run_quiet(["--nproc_per_node=2", "--numa_binding=node", "--python", sys.executable,
                        script, out], DDPRUN_SYSFS_ROOT=root)
    agenttest.expect_exit(result, 0, "--numa_binding=node")
    got = [open(os.path.join(out, r)).read() for r in ("0", "1")]
    check(got == ["0", "1"], f"Cpus_allowed_list of the workers: {got}")
    print("ok --numa_binding=node binds each worker to its node's CPUs")


work = ddptest.temp_dir()
try:
    version()
    legacy_launch(work)
    interpreter_named(work)
    quiet_and_clean(work)
    later_self_crash(work)
    static_progress()
    numa_binding(work)
finally:
    ddptest.remove_tree(work)
