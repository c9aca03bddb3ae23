"""package_build: scripts/package.sh on this build tree (--fast: a gzip .deb), then what the
packages promise checked from outside: the wheel's name and tag (its glibc is the highest GLIBC
version of any ELF file it carries, and each of them needs nothing beyond the manylinux core but
what the wheel carries), every file of python/ddprun/ in both packages, and the .deb's fields and
contents.

usage: package_build_test.py BUILD_DIR DIST_DIR   (the other package tests read DIST_DIR)
"""
import os
import re
import shutil
import subprocess
import sys
import zipfile

import ddptest
import packagetest

PROGRAMS = ("ddprun", "ddprun-guard", "ddp-store", "ddprun-stacks")


def project_version(build_dir):
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        found = re.search(r"^CMAKE_PROJECT_VERSION:STATIC=(.+)$", f.read(), re.M)
    ddptest.check(found, "CMakeCache.txt has no CMAKE_PROJECT_VERSION")
    return found.group(1)


def check_wheel(path, version, work):
    name = os.path.basename(path)
    tag = re.fullmatch(rf"ddprun-{re.escape(version)}-py3-none-manylinux_(\d+)_(\d+)_x86_64\.whl",
                       name)
    ddptest.check(tag, f"wheel name {name}")
    tag_glibc = (int(tag.group(1)), int(tag.group(2)))
    root = os.path.join(work, "wheel")
    with zipfile.ZipFile(path) as whl:
        whl.extractall(root)
        names = set(whl.namelist())
    data = f"ddprun-{version}.data"
    for program in PROGRAMS + ("ddprun-launch",):
        ddptest.check(f"{data}/scripts/{program}" in names, f"the wheel lacks {program}")
    missing = {p for p in packagetest.python_sources() if p not in names}
    ddptest.check(not missing, f"the wheel lacks python files {sorted(missing)}")
    ddptest.check(f"ddprun-{version}.dist-info/RECORD" in names, "the wheel has no RECORD")

    elves = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
             if packagetest.is_elf(os.path.join(d, f))]
    carried = {os.path.basename(e) for e in elves if ".so" in os.path.basename(e)}
    highest = max(v for e in elves for v in packagetest.glibc_versions(e))
    ddptest.check(highest == tag_glibc, f"tag names glibc {tag_glibc}, files need {highest}")
    for elf in elves:
        foreign = set(packagetest.needed(elf)) - packagetest.SYSTEM_LIBS - carried
        ddptest.check(not foreign, f"{os.path.relpath(elf, root)} needs {foreign}, not carried")
    print(f"wheel {name}: {os.path.getsize(path)} bytes, glibc {highest}, carries "
          f"{sorted(carried) or 'no libraries'}")


def check_deb(path, version):
    arch = ddptest.run(["dpkg", "--print-architecture"], check_rc=0).stdout.strip()
    ddptest.check(os.path.basename(path) == f"ddprun_{version}_{arch}.deb", f"deb name {path}")
    fields = ddptest.run(["dpkg-deb", "-f", path, "Package", "Version", "Depends"],
                         check_rc=0).stdout
    ddptest.check(f"Version: {version}" in fields, f"deb fields:\n{fields}")
    depends = re.search(r"^Depends: (.+)$", fields, re.M)
    ddptest.check(depends and "libc6" in depends.group(1), f"deb Depends:\n{fields}")
    listing = ddptest.run(["dpkg-deb", "-c", path], check_rc=0).stdout
    expected = [f"./usr/bin/{p}" for p in PROGRAMS + ("ddprun-launch",)]
    expected += ["./usr/include/ddp/init.hpp", "./usr/include/ddp/process_group.hpp",
                 "./usr/lib/cmake/ddp/ddpConfig.cmake", "./usr/lib/pkgconfig/ddp.pc",
                 "./usr/share/doc/ddprun/README.md",
                 "./usr/share/doc/ddprun/examples/CMakeLists.txt"]
    expected += [f"./usr/lib/python3/dist-packages/{p}" for p in packagetest.python_sources()]
    missing = [p for p in expected if not re.search(rf" {re.escape(p)}( |$)", listing, re.M)]
    ddptest.check(not missing, f"the deb lacks {missing}:\n{listing}")
    ddptest.check("./usr/lib/libddp.so" in listing, f"the deb lacks libddp:\n{listing}")
    ddptest.check("/work/" not in listing and "build/" not in listing, "build paths in the deb")
    print(f"deb {os.path.basename(path)}: {os.path.getsize(path)} bytes, "
          f"Depends: {depends.group(1)}")


def main():
    build_dir, dist = sys.argv[1], sys.argv[2]
    for tool in ("readelf", "objdump", "patchelf", "dpkg-deb", "dpkg-shlibdeps"):
        ddptest.require(shutil.which(tool), f"{tool} is needed (bash scripts/setup.sh)")
    ddptest.require(subprocess.run([ddptest.TORCH_PYTHON, "-c", "import wheel"],
                                   capture_output=True).returncode == 0,
                    "python3-wheel is needed (bash scripts/setup.sh)")
    version = project_version(build_dir)
    ddptest.remove_tree(dist)
    result = ddptest.run(["bash", os.path.join(ddptest.SOURCE_DIR, "scripts", "package.sh"),
                          "--build", build_dir, "--out", dist, "--fast"], timeout=240)
    ddptest.check(result.returncode == 0, f"package.sh exited {result.returncode}:\n"
                                          f"{result.stdout}\n{result.stderr}")
    printed = result.stdout.split()
    wheel = packagetest.one_package(dist, "ddprun-*.whl")
    deb = packagetest.one_package(dist, "ddprun_*.deb")
    ddptest.check(printed == [wheel, deb], f"package.sh printed {printed}")
    work = ddptest.temp_dir("ddp_package_")
    try:
        check_wheel(wheel, version, work)
        check_deb(deb, version)
    finally:
        ddptest.remove_tree(work)
    print("PASS package_build")


if __name__ == "__main__":
    main()
