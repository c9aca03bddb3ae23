"""package_wheel: the wheel installed as a PyTorch user would, into a fresh `python3 -m venv`
with no network (`pip install --no-index`, in a network namespace of its own when root), then
the venv's programs: `ddprun --version`, `ddprun-launch` under its own name, a 2-worker PyTorch
DDP job (/usr/bin/python3 workers) started by the venv's ddprun, `import ddprun` from the venv's
interpreter, and `pip uninstall` taking every installed file away again.

usage: wheel_test.py DIST_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import ddptest
import packagetest

# No user or site pip configuration (an index, find-links) may reach this install.
PIP_ENV = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}
WORKER = os.path.join(ddptest.SOURCE_DIR, "tests", "integration", "workers", "torch_ddp_train.py")


def offline(cmd):
    """cmd in a network namespace with only a loopback that is down, when we may make one."""
    if os.geteuid() == 0 and shutil.which("unshare"):
        return ["unshare", "--net"] + cmd
    return cmd


def install(venv, wheel):
    ddptest.run([ddptest.TORCH_PYTHON, "-m", "venv", venv], timeout=120, check_rc=0)
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
    result = ddptest.run(offline(pip + ["install", "--no-index", wheel]), timeout=120, env=PIP_ENV)
    ddptest.check(result.returncode == 0, f"pip install exited {result.returncode}:\n"
                                          f"{result.stdout}\n{result.stderr}")
    return pip


def check_programs(venv, version):
    bin_dir = os.path.join(venv, "bin")
    out = ddptest.run([os.path.join(bin_dir, "ddprun"), "--version"], check_rc=0).stdout
    ddptest.check(out.startswith(f"ddprun {version} "), f"ddprun --version printed {out!r}")
    out = ddptest.run([os.path.join(bin_dir, "ddprun-launch"), "--version"], check_rc=0).stdout
    ddptest.check(out.startswith(f"ddprun-launch {version} "), f"ddprun-launch --version: {out!r}")
    for program in ("ddp-store", "ddprun-stacks"):
        ddptest.run([os.path.join(bin_dir, program), "--help"], check_rc=0)
    # A carried library is loaded from the venv, not from the system's copy.
    lib_dir = os.path.realpath(os.path.join(venv, "lib", "ddprun"))
    for program in ("ddprun", "ddp-store", "ddprun-stacks"):
        loaded = packagetest.loaded_libraries(os.path.join(bin_dir, program))
        for soname in packagetest.needed(os.path.join(bin_dir, program)):
            if soname not in packagetest.SYSTEM_LIBS:
                ddptest.check(loaded.get(soname) == os.path.join(lib_dir, soname),
                              f"{program} loads {soname} from {loaded.get(soname)}, not the venv")


def check_ddp_job(venv, work):
    out = os.path.join(work, "job")
    os.mkdir(out)
    # The venv's bin first on PATH, as in an activated venv.
    env = {"PATH": os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"]}
    result = ddptest.run([os.path.join(venv, "bin", "ddprun"), "--python", ddptest.TORCH_PYTHON,
                          "--nproc_per_node=2", WORKER, out, "--steps", "3"], timeout=150, env=env)
    ddptest.check(result.returncode == 0, f"the venv's ddprun exited {result.returncode}:\n"
                                          f"{result.stdout}\n{result.stderr}")
    records = []
    for rank in range(2):
        with open(os.path.join(out, f"result_rank{rank}.json")) as f:
            records.append(json.load(f))
    for rank, record in enumerate(records):
        ddptest.check(record["rank"] == rank and record["world_size"] == 2, f"{record}")
        ddptest.check(record["allreduce"] == 1, f"all_reduce: {record}")
        ddptest.check(record["params"] == records[0]["params"], "parameters differ across ranks")


def check_import(venv):
    python = os.path.join(venv, "bin", "python")
    code = "import ddprun, os; print(os.path.dirname(ddprun.__file__))"
    where = ddptest.run([python, "-c", code], check_rc=0, env={"PYTHONPATH": ""}).stdout.strip()
    ddptest.check(where.startswith(os.path.realpath(venv)) or where.startswith(venv),
                  f"import ddprun found {where}, not the venv's")
    for rel in packagetest.python_sources():
        installed = os.path.join(os.path.dirname(where), rel)
        ddptest.check(os.path.exists(installed), f"{rel} is not installed in the venv")


def main():
    dist = sys.argv[1]
    ddptest.require_torch()
    ddptest.require(subprocess.run([ddptest.TORCH_PYTHON, "-c", "import ensurepip, venv"],
                                   capture_output=True).returncode == 0,
                    "python3-venv is needed (bash scripts/setup.sh)")
    wheel = packagetest.one_package(dist, "ddprun-*.whl")
    version = os.path.basename(wheel).split("-")[1]
    work = ddptest.temp_dir("ddp_wheel_")
    try:
        venv = os.path.join(work, "venv")
        pip = install(venv, wheel)
        check_programs(venv, version)
        check_ddp_job(venv, work)
        check_import(venv)
        ddptest.run(pip + ["uninstall", "-y", "ddprun"], timeout=60, env=PIP_ENV, check_rc=0)
        left = [p for p in ("bin/ddprun", "bin/ddprun-launch", "bin/ddp-store", "lib/ddprun")
                if os.path.exists(os.path.join(venv, p))]
        ddptest.check(not left, f"pip uninstall left {left}")
    finally:
        ddptest.remove_tree(work)
    print("PASS package_wheel")


if __name__ == "__main__":
    main()
