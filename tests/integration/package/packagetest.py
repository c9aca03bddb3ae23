"""Helpers shared by the package tests: the packages package_build left in the dist folder, and
reading ELF files the way scripts/package.sh does (readelf, objdump)."""
import glob
import os
import re
import subprocess

import ddptest

# The libraries a manylinux wheel may need without carrying them (scripts/package/elf.sh).
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
               "libutil.so.1", "ld-linux-x86-64.so.2"}


def one_package(dist, pattern):
    """The single file matching pattern in dist; fails when package_build left none or several."""
    found = glob.glob(os.path.join(dist, pattern))
    ddptest.check(len(found) == 1, f"expected one {pattern} in {dist} (package_build), "
                                   f"found {found}")
    return found[0]


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def needed(path):
    """The NEEDED sonames of an ELF file (empty for a static program)."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\).*\[(.*)\]", out)


def glibc_versions(path):
    """Every GLIBC_x.y version an ELF file references, as tuples of ints."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True).stdout
    return {tuple(int(p) for p in v.split(".")) for v in re.findall(r"GLIBC_([0-9][0-9.]*)", out)}


def python_sources():
    """Relative paths of every file of python/ddprun/ in the source tree (no caches)."""
    root = os.path.join(ddptest.SOURCE_DIR, "python")
    files = set()
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "ddprun")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        files.update(os.path.relpath(os.path.join(dirpath, f), root)
                     for f in filenames if not f.endswith(".pyc"))
    return files


def loaded_libraries(path):
    """{soname: real path} of every library ldd says path loads; fails on one not found."""
    out = ddptest.run(["ldd", path], check_rc=0).stdout
    ddptest.check("not found" not in out, f"ldd {path}:\n{out}")
    return {m.group(1): os.path.realpath(m.group(2))
            for m in re.finditer(r"^\s*(\S+) => (\S+) \(", out, re.M)}
