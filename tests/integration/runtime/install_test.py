"""The install test: `cmake --install` libddp to a temporary prefix, configure and build
examples/ against it with find_package(ddp), build the same program with pkg-config, and run
both on 2 ranks.

usage: install_test.py BUILD_DIR
"""

import os
import shutil
import sys

import ddptest
import runtime_launch


def main():
    build_dir = sys.argv[1]
    require_tools = shutil.which("cmake") and shutil.which("ninja") and shutil.which("pkg-config")
    ddptest.require(require_tools, "cmake, ninja and pkg-config are needed")
    work = ddptest.temp_dir("ddp_install_")
    try:
        prefix = os.path.join(work, "prefix")
        ddptest.run(["cmake", "--install", build_dir, "--prefix", prefix], timeout=120, check_rc=0)
        libdir = next(os.path.join(prefix, d) for d in ("lib", "lib64")
                      if os.path.exists(os.path.join(prefix, d, "cmake", "ddp")))
        for path in ("include/ddp/init.hpp", "include/ddp/process_group.hpp"):
            ddptest.check(os.path.exists(os.path.join(prefix, path)), f"{path} is not installed")
        ddptest.check(not os.path.exists(os.path.join(prefix, "include", "collectives")),
                      "internal headers were installed")

        example_build = os.path.join(work, "build")
        ddptest.run(["cmake", "-S", os.path.join(ddptest.SOURCE_DIR, "examples"), "-B",
                     example_build, "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}"],
                    timeout=120, check_rc=0)
        ddptest.run(["ninja", "-C", example_build], timeout=180, check_rc=0)

        pc_binary = os.path.join(work, "hello_ddp_pc")
        flags = ddptest.run(["pkg-config", "--cflags", "--libs", "ddp"], timeout=20, check_rc=0,
                            env={"PKG_CONFIG_PATH": os.path.join(libdir, "pkgconfig")})
        ddptest.run(["g++", os.path.join(ddptest.SOURCE_DIR, "examples", "hello_ddp.cpp"), "-o",
                     pc_binary] + flags.stdout.split(), timeout=180, check_rc=0)

        for binary in (os.path.join(example_build, "hello_ddp"), pc_binary):
            code, out = runtime_launch.launch(2, [], program=binary)
            ddptest.check(code == 0 and out.count(" ok") == 2, f"{binary} exited {code}:\n{out}")
        print("PASS install: find_package(ddp) and pkg-config builds ran on 2 ranks")
    finally:
        ddptest.remove_tree(work)


if __name__ == "__main__":
    main()
