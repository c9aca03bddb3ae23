#!/usr/bin/env python3
"""entrypoint_check_bench.py - what checking a -m module before the launch costs
(docs/BENCHMARKS.md).

    python3 scripts/bench/entrypoint_check_bench.py [--runs R]

ddprun checks a `-m` module with one `<python> -c <finder>` run before anything starts; a script
path needs only a stat. The same one-worker job (the stdlib's timeit, `-n 1 pass`) is started R
times each way, interleaved, and `python3 -c pass` R times as the floor of an interpreter start:

  script  ddprun <timeit.py's path> -n 1 pass
  module  ddprun -m timeit -n 1 pass

The figures: wall seconds of each command, median and range; the module's extra over the script
should be about one interpreter start. Env: BUILD (default build).
"""

import argparse
import os
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    ddprun = os.path.join(ROOT, os.environ.get("BUILD", "build"), "bin", "ddprun")
    timeit_py = subprocess.run(["python3", "-c", "import timeit; print(timeit.__file__)"],
                               capture_output=True, text=True, check=True).stdout.strip()
    cases = {"script": [ddprun, timeit_py, "-n", "1", "pass"],
             "module": [ddprun, "-m", "timeit", "-n", "1", "pass"],
             "python3 -c pass": ["python3", "-c", "pass"]}
    results = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            results[name].append(timed(cmd))
    print(f"load average {os.getloadavg()[0]:.1f}, {args.runs} runs each")
    for name, values in results.items():
        print(f"{name:16} median {statistics.median(values):.3f} s "
              f"({min(values):.3f} to {max(values):.3f})")
    extra = statistics.median(results["module"]) - statistics.median(results["script"])
    print(f"module - script  {extra:.3f} s; one interpreter start "
          f"{statistics.median(results['python3 -c pass']):.3f} s")


if __name__ == "__main__":
    main()
