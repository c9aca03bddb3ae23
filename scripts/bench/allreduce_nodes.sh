#!/usr/bin/env bash
# allreduce_nodes.sh: libddp's all_reduce across nodes, on a static job of NODES network-namespace
# nodes x NPROC ranks (scripts/netns-cluster.sh; needs root). Side by side in one run: Gloo's ring
# over every rank (--algorithm ring, the baseline) and auto, which is the hierarchical all_reduce
# on such a job (shared memory within a node, the ring among one leader per node). Prints bus
# bandwidth per size (median of ROUNDS, each round runs both) and the ratio hierarchical/ring.
#
#   scripts/bench/allreduce_nodes.sh [BUILD_DIR=build] [SIZES=64K..64M]
# Env: NODES (2), NPROC (2), ROUNDS (1), ITERS (0: by size).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../../build}" && pwd)"
sizes="${2:-64K..64M}"
nodes="${NODES:-2}"
nproc="${NPROC:-2}"
rounds="${ROUNDS:-1}"
iters="${ITERS:-0}"
rig="$here/../netns-cluster.sh"
work="$(mktemp -d /tmp/ddp-bench-nodes.XXXXXX)"
cleanup() {
  bash "$rig" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

bash "$rig" down >/dev/null
bash "$rig" up "$nodes" >/dev/null
master="$(bash "$rig" addr 1)"
port=29620

# run ALGORITHM: one static job on every node; node 1's rank 0 prints the JSON lines.
run() {
  local algorithm=$1 pids=() n
  port=$((port + 1))
  for ((n = 1; n <= nodes; n++)); do
    ip netns exec "ddpn$n" "$build/bin/ddprun" --nnodes="$nodes" --node_rank=$((n - 1)) \
      --master_addr="$master" --master_port="$port" --nproc_per_node="$nproc" --no_python \
      "$build/bin/ddp-bench" allreduce --algorithm "$algorithm" --sizes "$sizes" \
      --iters "$iters" --json --check >"$work/node$n.out" 2>"$work/node$n.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { cat "$work"/node*.err >&2; echo "allreduce_nodes: a node failed" >&2; exit 1; }
  done
  grep '^{' "$work/node1.out" | sed "s/\"mode\":\"ddp\"/\"mode\":\"$algorithm\"/" >>"$work/all.jsonl"
}

for ((round = 0; round < rounds; round++)); do
  run ring
  run auto
done

python3 - "$work/all.jsonl" "$nodes" "$nproc" <<'PY'
import json, statistics, sys
path, nodes, nproc = sys.argv[1], sys.argv[2], sys.argv[3]
runs = {}
for line in open(path):
    r = json.loads(line)
    if r.get("check", "ok") != "ok":
        sys.exit(f"{r['mode']} all_reduce gave a wrong result at {r['size_bytes']} bytes")
    runs.setdefault((r["mode"], r["size_bytes"]), []).append(r["busbw_gbps"])
def fmt(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"
sizes = sorted({s for (_, s) in runs})
print(f"all_reduce float32 sum, {nodes} nodes x {nproc} ranks: bus bandwidth GB/s, median of "
      f"{len(runs[('ring', sizes[0])])} round(s)")
print(f"{'size':>8} {'ring':>8} {'hier':>8} {'hier/ring':>10}")
for s in sizes:
    ring, hier = (statistics.median(runs[(m, s)]) for m in ("ring", "auto"))
    print(f"{fmt(s):>8} {ring:8.3f} {hier:8.3f} {hier / ring:10.2f}")
PY
