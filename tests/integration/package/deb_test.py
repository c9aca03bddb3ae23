"""package_deb: `dpkg -i` of the .deb on this machine, then ddprun from /usr/bin, the example
project shipped in /usr/share/doc/ddprun/examples built with find_package(ddp) against the
installed libddp and run on 2 ranks by the installed ddprun, `import ddprun` from Debian's
python3 (as root, so it writes __pycache__), and `dpkg -r` leaving nothing of the package's
file list behind. Needs root; skipped (exit 77) otherwise.

usage: deb_test.py DIST_DIR
"""
import os
import shutil
import sys
import time

import ddptest
import packagetest


def dpkg(args, timeout=120):
    """dpkg ARGS, waiting up to a minute for another dpkg or apt-get to release its lock."""
    deadline = time.monotonic() + 60
    while True:
        result = ddptest.run(["dpkg"] + args, timeout=timeout)
        if result.returncode == 0 or "lock" not in result.stderr or time.monotonic() > deadline:
            break
        time.sleep(2)
    ddptest.check(result.returncode == 0, f"dpkg {' '.join(args)} exited {result.returncode}:\n"
                                          f"{result.stdout}\n{result.stderr}")
    return result


def is_installed():
    result = ddptest.run(["dpkg-query", "-W", "-f=${db:Status-Status}", "ddprun"])
    return result.returncode == 0 and result.stdout.strip() not in ("", "not-installed")


def build_and_run_example(work, version):
    out = ddptest.run(["/usr/bin/ddprun", "--version"], check_rc=0).stdout
    ddptest.check(out.startswith(f"ddprun {version} "), f"/usr/bin/ddprun --version: {out!r}")
    source = os.path.join(work, "example")
    shutil.copytree("/usr/share/doc/ddprun/examples", source)
    build = os.path.join(work, "build")
    # No CMAKE_PREFIX_PATH: find_package(ddp) finds /usr/lib/cmake/ddp as any package's.
    ddptest.run(["cmake", "-S", source, "-B", build, "-G", "Ninja"], timeout=120, check_rc=0)
    ddptest.run(["ninja", "-C", build], timeout=180, check_rc=0)
    libddp = packagetest.loaded_libraries(os.path.join(build, "hello_ddp")).get("libddp.so.0")
    ddptest.check(libddp == os.path.realpath("/usr/lib/libddp.so.0"),
                  f"hello_ddp loads libddp from {libddp}, not the package's")
    result = ddptest.run(["/usr/bin/ddprun", "--nproc_per_node=2", "--no_python",
                          os.path.join(build, "hello_ddp")], timeout=90)
    ddptest.check(result.returncode == 0 and result.stdout.count(" ok") == 2,
                  f"hello_ddp under /usr/bin/ddprun exited {result.returncode}:\n"
                  f"{result.stdout}\n{result.stderr}")


def check_import():
    env = {"PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": ""}
    where = ddptest.run(["/usr/bin/python3", "-c", "import ddprun; print(ddprun.__file__)"],
                        check_rc=0, env=env).stdout.strip()
    ddptest.check(where == "/usr/lib/python3/dist-packages/ddprun/__init__.py",
                  f"import ddprun found {where}")


def check_nothing_left(files):
    """Every file of the package is gone; a directory that stays belongs to another package."""
    for path in files:
        if path == "/.":
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            owner = ddptest.run(["dpkg", "-S", path])
            ddptest.check(owner.returncode == 0, f"dpkg -r left the directory {path}")
        else:
            ddptest.check(not os.path.lexists(path), f"dpkg -r left {path}")
    ddptest.check(not is_installed(), "dpkg still lists ddprun after dpkg -r")


def main():
    dist = sys.argv[1]
    ddptest.require(os.geteuid() == 0, "dpkg -i needs root")
    for tool in ("cmake", "ninja", "g++"):
        ddptest.require(shutil.which(tool), f"{tool} is needed to build the example")
    deb = packagetest.one_package(dist, "ddprun_*.deb")
    version = os.path.basename(deb).split("_")[1]
    ddptest.check(not is_installed(), "ddprun is installed on this machine already: the test "
                                      "would replace and then remove it (dpkg -r ddprun first)")
    work = ddptest.temp_dir("ddp_deb_")
    installed = False
    try:
        dpkg(["-i", deb])
        installed = True
        files = dpkg(["-L", "ddprun"]).stdout.split("\n")
        files = [f for f in files if f.startswith("/")]
        build_and_run_example(work, version)
        check_import()
        dpkg(["-r", "ddprun"])
        installed = False
        check_nothing_left(files)
    finally:
        if installed:
            dpkg(["-r", "ddprun"])
        ddptest.remove_tree(work)
    print(f"PASS package_deb ({len(files)} paths installed and removed)")


if __name__ == "__main__":
    main()
