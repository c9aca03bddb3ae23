#!/usr/bin/env bash
# The README's test command: install dependencies, configure, build, and run every test label
# (unit, integration, torch, netns, slurm, slow, gpu) with DDP_REQUIRE_ALL=1 so that no test may
# skip, except the gpu label's, which skips on a machine without a GPU (CI has none).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake --preset default -DDDP_WERROR=ON
cmake --build --preset default

export DDP_REQUIRE_ALL=1
cd build
# One test more than cores: the tests wait on peers, timeouts and children much of the time
# (at -j2 on 2 cores the suite used 1.2 cores on average; docs/testing.md).
ctest --output-on-failure --timeout 600 -j "$(( $(nproc) + 1 ))" "$@"
