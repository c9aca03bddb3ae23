#!/usr/bin/env bash
# allreduce.sh: float32 sum all_reduce, side by side in one run on NPROC ranks: libddp and Gloo
# called directly with the same algorithm, alternating in one process (ddp-bench allreduce --mode
# paired, so both meet the same moments of a noisy machine), and PyTorch 1.13's gloo all_reduce
# (torch_allreduce.py under /usr/bin/python3). Prints bus bandwidth per size, from the median
# operation's time, and the ratios ddp/gloo (goal >= 0.95) and ddp/torch (goal >= 1). With SHM=1
# (the default) it also runs libddp's shared-memory all_reduce (--algorithm shm, what ddp::init
# picks when every rank is on one host) and prints it against the same two baselines.
# Each launch goes through `ddprun --nproc_per_node=NPROC` when it is built.
#
#   scripts/bench/allreduce.sh [BUILD_DIR=build] [SIZES=4K..256M]
# Env: NPROC (2), ALGORITHM (ring), ROUNDS (1: each mode runs ROUNDS times, interleaved; the
# median of the rounds is printed, and ddp/gloo is the median of the rounds' paired ratios),
# ITERS (0: by size, 5..200 timed operations).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../../build}" && pwd)"
sizes="${2:-4K..256M}"
nproc="${NPROC:-2}"
algorithm="${ALGORITHM:-ring}"
rounds="${ROUNDS:-1}"
iters="${ITERS:-0}"
with_shm="${SHM:-1}"
work="$(mktemp -d /tmp/ddp-bench-allreduce.XXXXXX)"
store_pid=""
cleanup() {
  [ -n "$store_pid" ] && kill "$store_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# launch PROGRAM ARGS...: runs PROGRAM on $nproc ranks, stdout of all ranks to stdout.
launch() {
  if [ -x "$build/bin/ddprun" ]; then
    local program="$1"; shift
    case "$program" in
      *.py) PYTHON_EXEC=/usr/bin/python3 "$build/bin/ddprun" --nproc_per_node="$nproc" "$program" "$@" ;;
      *) "$build/bin/ddprun" --nproc_per_node="$nproc" --no_python "$program" "$@" ;;
    esac
    return
  fi
  # No ddprun yet: a fresh ddp-store per launch (no stale keys) and the launcher's variables.
  "$build/bin/ddp-store" serve --host 127.0.0.1 --port 0 >"$work/store.out" 2>/dev/null &
  store_pid=$!
  for _ in $(seq 100); do grep -q listening "$work/store.out" && break; sleep 0.05; done
  local port pids=() rank
  port="$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/store.out")"
  local program="$1"; shift
  case "$program" in *.py) set -- -u "$program" "$@"; program=/usr/bin/python3 ;; esac
  for ((rank = 0; rank < nproc; rank++)); do
    RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=$nproc LOCAL_WORLD_SIZE=$nproc GROUP_RANK=0 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" TORCHELASTIC_RESTART_COUNT=0 \
      TORCHELASTIC_USE_AGENT_STORE=True \
      "$program" "$@" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  kill "$store_pid"
  wait "$store_pid" 2>/dev/null || true
  store_pid=""
}

for ((round = 0; round < rounds; round++)); do
  # libddp and Gloo direct in one process, one operation of each in turn: both meet the same load.
  launch "$build/bin/ddp-bench" allreduce --mode paired --algorithm "$algorithm" --sizes "$sizes" \
    --iters "$iters" --json --check >"$work/paired.jsonl"
  grep '"mode":"ddp"' "$work/paired.jsonl" >>"$work/ddp.jsonl"
  grep '"mode":"gloo"' "$work/paired.jsonl" >>"$work/gloo.jsonl"
  if [ "$with_shm" = 1 ]; then
    launch "$build/bin/ddp-bench" allreduce --mode ddp --algorithm shm --sizes "$sizes" \
      --iters "$iters" --json --check >>"$work/shm.jsonl"
  fi
  byte_sizes="$(sed -n 's/.*"size_bytes":\([0-9]*\).*/\1/p' "$work/ddp.jsonl" | sort -un | tr '\n' ' ')"
  # shellcheck disable=SC2086
  launch "$here/torch_allreduce.py" $byte_sizes >>"$work/torch.jsonl"
done

python3 - "$work" "$nproc" "$algorithm" <<'PY'
import json, os, statistics, sys
work, nproc, algorithm = sys.argv[1], sys.argv[2], sys.argv[3]
runs = {}  # (mode, size) -> each round's record, in round order
modes = [m for m in ("ddp", "gloo", "torch", "shm") if os.path.exists(os.path.join(work, f"{m}.jsonl"))]
for mode in modes:
    for line in open(os.path.join(work, f"{mode}.jsonl")):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("check", "ok") != "ok":
            sys.exit(f"{mode} all_reduce gave a wrong result at {r['size_bytes']} bytes")
        runs.setdefault((mode, r["size_bytes"]), []).append(r)
sizes = sorted({s for (_, s) in runs})
nan = float("nan")
def busbw(record):  # from the median operation's time
    size, world = record["size_bytes"], record["world_size"]
    return size / (record["time_us_median"] * 1e-6) / 1e9 * 2 * (world - 1) / world
def median(mode, size):
    records = runs.get((mode, size))
    return statistics.median(busbw(r) for r in records) if records else nan
def paired_ratio(size, field):
    # ddp and gloo of one round ran in one process, alternating: compare within each round.
    ddp, gloo = runs.get(("ddp", size), []), runs.get(("gloo", size), [])
    ratios = [g[field] / d[field] for d, g in zip(ddp, gloo) if d[field] > 0]
    return statistics.median(ratios) if ratios else nan
def fmt(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"
rounds = max(len(v) for v in runs.values())
print(f"all_reduce float32 sum, {nproc} ranks, {algorithm}: bus bandwidth GB/s of the median "
      f"operation, median of {rounds} round(s); ddp/gloo compares the median operations of each "
      f"round (paired in one process), median over rounds; 'mean' compares mean times instead")
shm = "shm" in modes
head = f"{'size':>8} {'ddp':>8} {'gloo':>8} {'torch':>8} {'ddp/gloo':>9} {'(mean)':>7} {'ddp/torch':>10}"
if shm:
    head += f" | {'shm':>8} {'shm/gloo':>9} {'shm/torch':>10}"
print(head)
for s in sizes:
    d, g, t, m = (median(k, s) for k in ("ddp", "gloo", "torch", "shm"))
    line = (f"{fmt(s):>8} {d:8.3f} {g:8.3f} {t:8.3f} {paired_ratio(s, 'time_us_median'):9.2f} "
            f"{paired_ratio(s, 'time_us'):7.2f} {d / t:10.2f}")
    if shm:
        line += f" | {m:8.3f} {m / g:9.2f} {m / t:10.2f}"
    print(line)
PY
