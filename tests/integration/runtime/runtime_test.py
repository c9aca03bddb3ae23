"""libddp end to end: runtime_worker scenarios on N real processes (see runtime_launch.py).

usage: runtime_test.py ops|ops-ring|ops-bcube|ops-shm|small-shm|gpu-ops|subgroups|timeout|timeout-ring|restart NPROC

`ops` runs with the default all_reduce algorithm (auto: shared memory on one host); the ops-<name>
scenarios force DDP_ALLREDUCE_ALGORITHM=<name>.
"""

import sys

import ddptest
import runtime_launch
from runtime_launch import MIB


def expect_ok(nproc, args, code, out, scenario):
    ddptest.check(code == 0, f"{scenario} exited {code}:\n{out}")
    ok = out.count(f"OK {scenario}")
    ddptest.check(ok == nproc, f"{ok} of {nproc} ranks printed 'OK {scenario}':\n{out}")


def main():
    scenario, nproc = sys.argv[1], int(sys.argv[2])
    if scenario == "ops":
        # sizes 1 and odd on every op x dtype (send/recv too), then 64 MiB tensors.
        code, out = runtime_launch.launch(nproc, ["ops", "1", "1001"])
        expect_ok(nproc, [], code, out, "ops")
        if nproc <= 2:  # 64 MiB on 4 ranks costs a minute on 2 cores; 2 ranks cover the size
            code, out = runtime_launch.launch(nproc, ["ops-big", str(64 * MIB)], timeout=110)
            expect_ok(nproc, [], code, out, "ops-big")
    elif scenario.startswith("ops-"):  # one all_reduce algorithm forced
        algorithm = scenario[len("ops-"):]
        env = {"DDP_ALLREDUCE_ALGORITHM": algorithm}
        code, out = runtime_launch.launch(nproc, ["ops", "1", "1001"], env=env)
        expect_ok(nproc, [], code, out, "ops")
        if algorithm != "bcube" and nproc <= 2:
            code, out = runtime_launch.launch(nproc, ["ops-big", str(64 * MIB)], timeout=110,
                                              env=env)
            expect_ok(nproc, [], code, out, "ops-big")
    elif scenario == "small-shm":  # a /dev/shm with room for one rank's segment, not two
        ddptest.require_root()
        inner = ("mount -t tmpfs -o size=12m tmpfs /dev/shm && "
                 "exec /usr/bin/python3 \"$0\" small-shm-inside \"$1\"")
        result = ddptest.run(["unshare", "-m", "sh", "-c", inner, __file__, str(nproc)],
                             timeout=120)
        ddptest.check(result.returncode == 0, f"small /dev/shm: exit {result.returncode}\n"
                      f"{result.stdout}{result.stderr}")
        print(result.stdout)
    elif scenario == "small-shm-inside":  # in the private mount namespace made above
        code, out = runtime_launch.launch(nproc, ["ops", "1", "1001"])
        expect_ok(nproc, [], code, out, "ops")  # auto: falls back to TCP, and says so once
        warnings = out.count("all_reduce falls back to TCP (ring)")
        ddptest.check(warnings == 1 and "/dev/shm too small?" in out,
                      f"{warnings} fallback warnings (expected 1 naming /dev/shm):\n{out}")
        code, out = runtime_launch.launch(nproc, ["ops", "1"], env={"DDP_ALLREDUCE_ALGORITHM": "shm"})
        ddptest.check(code != 0 and "is /dev/shm too small?" in out,
                      f"shm forced on a full /dev/shm: exit {code}\n{out}")
        print("forced shm refused: " + next(l for l in out.splitlines() if "too small" in l))
    elif scenario == "gpu-ops":  # NCCL on device buffers; CI has no GPU, so never required
        probe = ddptest.run([ddptest.bin_path("runtime_worker"), "cuda-devices"], timeout=60)
        devices = int(probe.stdout.strip().rsplit("=", 1)[1]) if "=" in probe.stdout else 0
        if devices < nproc:
            print(f"SKIP: {nproc} GPU(s) needed, {devices} visible (or a build without CUDA)")
            sys.exit(77)
        code, out = runtime_launch.launch(nproc, ["ops-cuda", "1", "1001", str(4 * MIB)],
                                          timeout=200)
        expect_ok(nproc, [], code, out, "ops-cuda")
    elif scenario == "subgroups":
        code, out = runtime_launch.launch(nproc, ["subgroups"])
        expect_ok(nproc, [], code, out, "subgroups")
    elif scenario in ("timeout", "timeout-ring"):  # shared memory notices the exit; TCP too
        env = {"DDP_ALLREDUCE_ALGORITHM": "ring"} if scenario == "timeout-ring" else None
        code, out = runtime_launch.launch(nproc, ["timeout"], env=env)
        leaver = nproc - 1
        ddptest.check(f"LEAVING rank={leaver}" in out, f"rank {leaver} did not leave:\n{out}")
        ddptest.check(out.count("OK timeout") == nproc - 1,
                      f"not every remaining rank named rank {leaver}:\n{out}")
        ddptest.check(f"rank [{leaver}] of {nproc} never arrived" in out,
                      f"error does not name the missing rank:\n{out}")
        ddptest.check(code == 0, f"exit code {code}:\n{out}")
    elif scenario == "restart":
        code, out = runtime_launch.launch(nproc, ["restart"], max_restarts=1)
        ddptest.check("FAILING attempt=0 rank=1" in out, f"attempt 0 did not fail:\n{out}")
        expect_ok(nproc, [], code, out, "restart attempt=1")
    else:
        ddptest.fail(f"unknown scenario {scenario}")
    if scenario.startswith("timeout"):
        print(out)  # the error text each rank printed
    print(f"PASS runtime {scenario} nproc={nproc} "
          f"({'ddprun' if runtime_launch.have_ddprun() else 'store + env by hand'})")


if __name__ == "__main__":
    main()
