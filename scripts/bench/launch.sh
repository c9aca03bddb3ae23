#!/bin/bash
# Launch benchmark: ddprun next to torchrun 1.13 in one run. Prints launch+teardown time of
# `--nproc_per_node=8 --no_python true` (median of N), restart latency (worker exit -> all workers
# running again) and the agent's peak RSS.
# Usage: scripts/bench/launch.sh [BUILD_DIR=build] [RUNS=20]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
runs="${2:-20}"
exec /usr/bin/python3 "$here/launch_bench.py" --ddprun "$build/bin/ddprun" --runs "$runs"
