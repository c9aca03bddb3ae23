#!/bin/bash
# Forkserver benchmark: 8 PyTorch workers launched by ddprun with exec, by ddprun's forkserver and
# by torchrun 1.13 in one run; restart latency exec vs forkserver; files opened per launch.
# Usage: scripts/bench/forkserver.sh [BUILD_DIR=build] [RUNS=3]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
runs="${2:-3}"
exec /usr/bin/python3 "$here/forkserver_bench.py" --ddprun "$build/bin/ddprun" --runs "$runs"
