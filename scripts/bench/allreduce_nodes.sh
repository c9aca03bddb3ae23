#!/usr/bin/env bash
# allreduce_nodes.sh: libddp's all_reduce across nodes, on a static job of NODES network-namespace
# nodes x NPROC ranks (scripts/netns-cluster.sh; needs root). Side by side in one run: Gloo's ring
# over every rank (--algorithm ring, the baseline), auto, which is the hierarchical all_reduce on
# such a job (shared memory within a node, the ring among one leader per node), and PyTorch 1.13's
# gloo all_reduce (torch_allreduce.py; TORCH=0 skips it). Prints bus bandwidth per size (median of
# ROUNDS, each round runs all three) and the ratios of hierarchical to ring and to PyTorch.
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
with_torch="${TORCH:-1}"
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

# run MODE PROGRAM ARGS...: one static job on every node; node 1's rank 0 prints the JSON lines,
# kept under "mode":"MODE". Gloo in PyTorch picks its address by the host name, which resolves to
# 127.0.0.1 in every namespace: GLOO_SOCKET_IFNAME names the node's interface instead.
run() {
  local mode=$1 pids=() n
  shift
  port=$((port + 1))
  for ((n = 1; n <= nodes; n++)); do
    GLOO_SOCKET_IFNAME=eth0 PYTHON_EXEC=/usr/bin/python3 ip netns exec "ddpn$n" \
      "$build/bin/ddprun" --nnodes="$nodes" --node_rank=$((n - 1)) --master_addr="$master" \
      --master_port="$port" --nproc_per_node="$nproc" "$@" >"$work/node$n.out" \
      2>"$work/node$n.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { cat "$work"/node*.err >&2; echo "allreduce_nodes: a node failed" >&2; exit 1; }
  done
  grep '^{' "$work/node1.out" | sed -E "s/\"mode\":\"[a-z]+\"/\"mode\":\"$mode\"/" >>"$work/all.jsonl"
}

for ((round = 0; round < rounds; round++)); do
  for algorithm in ring auto; do
    run "$algorithm" --no_python "$build/bin/ddp-bench" allreduce --algorithm "$algorithm" \
      --sizes "$sizes" --iters "$iters" --json --check
  done
  if [ "$with_torch" = 1 ]; then
    byte_sizes="$(sed -n 's/.*"size_bytes":\([0-9]*\).*/\1/p' "$work/all.jsonl" | sort -un | tr '\n' ' ')"
    # shellcheck disable=SC2086
    run torch "$here/torch_allreduce.py" $byte_sizes
  fi
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
torch = any(m == "torch" for (m, _) in runs)
head = f"{'size':>8} {'ring':>8} {'hier':>8} {'hier/ring':>10}"
print(head + (f" {'torch':>8} {'hier/torch':>11}" if torch else ""))
for s in sizes:
    ring, hier = (statistics.median(runs[(m, s)]) for m in ("ring", "auto"))
    line = f"{fmt(s):>8} {ring:8.3f} {hier:8.3f} {hier / ring:10.2f}"
    if torch:
        t = statistics.median(runs[("torch", s)])
        line += f" {t:8.3f} {hier / t:11.2f}"
    print(line)
PY
