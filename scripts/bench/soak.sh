#!/usr/bin/env bash
# The fault soak (docs/soak.md): one long elastic job on 4 network-namespace nodes with faults
# injected at random moments from a printed seed; ends with a table and one JSON line.
#   soak.sh --minutes M --seed S [--backend c10d|etcd] [--recovery restart|inprocess]
#           [--job torch|ddp-train] [--start_method spawn|forkserver] [--work DIR]
# Needs root, the build (BUILD_DIR, default build/) and scripts/setup.sh's packages. Its nodes
# are a rig of their own (netns-cluster.sh, DDP_NETNS_RIG=soak); soak.py takes
# /tmp/ddprun-soak.lock, so two soaks (this and the suite's short one) take turns on it.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
exec python3 scripts/bench/soak/soak.py --bin "$BUILD_DIR/bin" "$@"
