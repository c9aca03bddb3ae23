"""ddp-bench allreduce under a real ddprun: every mode and algorithm prints one JSON object per
size with check=ok (--check verifies every result), and bad flag combinations exit 2 naming them.
Figures are not asserted: benchmarks print them (docs/BENCHMARKS.md)."""

import json

import ddptest

SIZES = ["4K", "1M"]


def bench(nproc, args):
    cmd = [ddptest.bin_path("ddprun"), f"--nproc_per_node={nproc}",
           ddptest.bin_path("ddp-bench"), "allreduce", "--sizes", ",".join(SIZES), "--iters", "3",
           "--json", "--check"] + args
    result = ddptest.run(cmd, timeout=90)
    ddptest.check(result.returncode == 0, f"{args}: exit {result.returncode}\n{result.stderr[-3000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def expect_results(nproc, args, modes, algorithm):
    lines = bench(nproc, args)
    ddptest.check(len(lines) == len(SIZES) * len(modes), f"{args}: {len(lines)} results:\n{lines}")
    for line in lines:
        ddptest.check(line["check"] == "ok", f"{args}: wrong result {line}")
        ddptest.check(line["mode"] in modes and line["algorithm"] == algorithm,
                      f"{args}: unexpected {line}")
        ddptest.check(line["world_size"] == nproc and line["busbw_gbps"] > 0, f"{args}: {line}")
        ddptest.check(0 < line["time_us_median"] <= line["time_us"] * line["iters"],
                      f"{args}: median time out of range {line}")


expect_results(2, ["--mode", "paired"], {"ddp", "gloo"}, "ring")
expect_results(3, ["--algorithm", "shm"], {"ddp"}, "shm")
expect_results(2, ["--mode", "gloo", "--algorithm", "bcube"], {"gloo"}, "bcube")

refused = ddptest.run([ddptest.bin_path("ddp-bench"), "allreduce", "--mode", "gloo",
                       "--algorithm", "shm"], timeout=20)
ddptest.check(refused.returncode == 2 and "--algorithm shm" in refused.stderr,
              f"gloo + shm: exit {refused.returncode}\n{refused.stderr}")
print("PASS bench allreduce")
