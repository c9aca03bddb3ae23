#!/usr/bin/env bash
# rendezvous.sh — c10d rendezvous figures on loopback (docs/BENCHMARKS.md).
#
#   rendezvous.sh scale K [K...]   K ddprun agents (--nnodes=K, one trivial worker each): seconds
#                                  from the first agent's start to every agent's worker running
#   rendezvous.sh torchrun K       the same with torchrun 1.13 (PET_REDIRECTS=9:1 PET_TEE=9:1)
#   rendezvous.sh node_loss        3 agents (--nnodes=2:3, keep_alive_interval=1,
#                                  keep_alive_max_attempt=2); SIGKILL one: seconds until both
#                                  survivors run restarted workers
# Env: BUILD (default build), PORT (default 29611). Each worker writes its start time (date) to a
# file named after its RANK and WORLD_SIZE; figures come from those files, not from logs.
set -euo pipefail
BUILD=${BUILD:-build}
DDPRUN=$(cd "$BUILD/bin" && pwd)/ddprun
PORT=${PORT:-29611}
WORK=$(mktemp -d /tmp/ddp-bench-rdzv.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
ulimit -n "$(ulimit -Hn)"

now() { date +%s.%N; }
# The worker: one shell that records when it started.
WORKER=(/bin/sh -c 'date +%s.%N > "$0/world${WORLD_SIZE}_rank${RANK}"; sleep "${1:-0}"')

run_agents() {  # run_agents LAUNCHER K OUT [extra ddprun args...]; waits for every agent
  local launcher=$1 k=$2 out=$3
  shift 3
  local pids=()
  for ((i = 0; i < k; i++)); do
    if [ "$launcher" = ddprun ]; then
      "$DDPRUN" --nnodes="$k" --nproc_per_node=1 --rdzv_backend=c10d \
        --rdzv_endpoint=127.0.0.1:"$PORT" --rdzv_id="bench$k" "$@" \
        --no_python "${WORKER[@]}" "$out" >/dev/null 2>"$out.agent$i.log" &
    else
      PET_REDIRECTS=9:1 PET_TEE=9:1 /usr/bin/torchrun --nnodes="$k" --nproc_per_node=1 \
        --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:"$PORT" --rdzv_id="bench$k" "$@" \
        --no_python "${WORKER[@]}" "$out" >/dev/null 2>"$out.agent$i.log" &
    fi
    pids+=($!)
  done
  LAUNCHED=$(now)
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  [ "$failed" = 0 ] || echo "  warning: $failed agent(s) exited non-zero (logs in $out.agent*.log)" >&2
}

latest_start() { cat "$1"/world"$2"_rank* | sort -n | tail -1; }

scale() {  # scale LAUNCHER K
  local launcher=$1 k=$2 out="$WORK/$1-$2"
  mkdir -p "$out"
  local t0
  t0=$(now)
  run_agents "$launcher" "$k" "$out"
  local started
  started=$(ls "$out" | grep -c "^world${k}_rank" || true)
  local last
  last=$(latest_start "$out" "$k")
  printf '%-8s K=%-5d workers started %d/%d  first agent start -> last worker start: %.2f s (last agent launched at %.2f s)\n' \
    "$launcher" "$k" "$started" "$k" "$(echo "$last - $t0" | bc -l)" "$(echo "$LAUNCHED - $t0" | bc -l)"
  PORT=$((PORT + 1))
}

node_loss() {
  local out="$WORK/loss"
  mkdir -p "$out"
  local pids=()
  for i in 0 1 2; do
    "$DDPRUN" --nnodes=2:3 --nproc_per_node=1 --rdzv_backend=c10d \
      --rdzv_endpoint=127.0.0.1:"$PORT" --rdzv_id=loss \
      --rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=2 \
      --no_python /bin/sh -c 'date +%s.%N > "$0/world${WORLD_SIZE}_rank${RANK}"; [ "$WORLD_SIZE" = 3 ] && exec sleep 60; exit 0' \
      "$out" >/dev/null 2>"$out.agent$i.log" &
    pids+=($!)
  done
  until [ "$(ls "$out" | grep -c '^world3_' || true)" = 3 ]; do sleep 0.05; done
  # Kill an agent that does not host the store (group rank 0 hosts it).
  local victim
  victim=$(grep -L "hosts the store" "$out".agent*.log | head -1 | sed 's/.*agent\([0-9]*\)\.log/\1/')
  local t0
  t0=$(now)
  kill -9 "${pids[$victim]}"
  unset "pids[$victim]"
  wait "${pids[@]}" || true
  local last
  last=$(latest_start "$out" 2)
  printf 'node loss (interval 1 s, 2 attempts): SIGKILL -> both survivors restarted: %.2f s\n' \
    "$(echo "$last - $t0" | bc -l)"
}

case "${1:-}" in
  scale) shift; for k in "$@"; do scale ddprun "$k"; done ;;
  torchrun) shift; for k in "$@"; do scale torchrun "$k"; done ;;
  node_loss) node_loss ;;
  *) echo "usage: rendezvous.sh scale K... | torchrun K... | node_loss" >&2; exit 2 ;;
esac
