#!/usr/bin/env bash
# The README's first Quick start command: install the dependencies, configure and build with the
# default preset, then train the reference MLP on Fashion-MNIST with two CPU workers under ddprun,
# printing progress lines and, last, the test accuracy.
# Usage: bash scripts/demo.sh [extra ddp-train flags, e.g. --epochs 1]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake --preset default
cmake --build --preset default --target ddprun ddp-train

echo "demo: build/bin/ddprun --nproc_per_node=2 build/bin/ddp-train --epochs 3 $*"
build/bin/ddprun --nproc_per_node=2 build/bin/ddp-train --epochs 3 "$@"
