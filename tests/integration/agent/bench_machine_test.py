"""ddp-bench machine: prints its four figures (page fault alone and at once, process switch,
process start), each a positive number, and refuses a bad flag with exit 2 and its usage line.
Figures are not asserted: benchmarks print them (docs/BENCHMARKS.md)."""

import re

import ddptest

result = ddptest.run([ddptest.bin_path("ddp-bench"), "machine", "--pages", "16", "--procs", "8",
                      "--rounds", "1"], timeout=60)
ddptest.check(result.returncode == 0, f"exit {result.returncode}\n{result.stderr}")
for label in ("page fault, 1 process alone", "page fault,    8 processes at once",
              "process switch", "process start"):
    line = next((l for l in result.stdout.splitlines() if label in l), None)
    ddptest.check(line is not None, f"no '{label}' line in:\n{result.stdout}")
    figure = re.search(r"\s([0-9]+\.[0-9]+) us", line)
    ddptest.check(figure is not None and float(figure.group(1)) > 0, f"no figure in '{line}'")

refused = ddptest.run([ddptest.bin_path("ddp-bench"), "machine", "--pages", "0"], timeout=20)
ddptest.check(refused.returncode == 2 and "usage: ddp-bench-machine" in refused.stderr,
              f"--pages 0: exit {refused.returncode}\n{refused.stderr}")
print("PASS bench machine")
