#!/usr/bin/env bash
# metrics.sh: what serving /metrics costs a ddprun agent. Runs an agent with 4 idle workers
# (`sleep`) for SECONDS without --metrics_port, then with it while curl scrapes every second (as
# a Prometheus scrape_interval of 1s would), ROUNDS times each, interleaved. Prints the agent's
# CPU time over the window (/proc/PID/schedstat, in ns; the scraper not counted), its RSS at the end
# and its peak RSS (VmHWM), per run and as medians.
#
#   scripts/bench/metrics.sh [BUILD_DIR=build] [SECONDS=30]
# Env: ROUNDS (3), NPROC (4).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../../build}" && pwd)"
seconds="${2:-30}"
rounds="${ROUNDS:-3}"
nproc="${NPROC:-4}"
agent=""
cleanup() {
  [ -n "$agent" ] && kill -KILL "$agent" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT

cpu_ns() { awk '{print $1}' "/proc/$1/schedstat"; }
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# run MODE: one agent run; prints "cpu_ms rss_kb hwm_kb".
run() {
  local mode="$1" port="" args=()
  if [ "$mode" = on ]; then
    port="$(free_port)"
    args=(--metrics_port "$port" --metrics_addr 127.0.0.1)
  fi
  "$build/bin/ddprun" --nproc_per_node "$nproc" "${args[@]}" --log_level warn \
    --no_python sleep "$((seconds + 30))" >/dev/null 2>&1 &
  agent=$!
  sleep 1  # the workers are up; start-up is not what this measures
  local start end i
  start="$(cpu_ns "$agent")"
  for ((i = 0; i < seconds; i++)); do
    if [ -n "$port" ]; then
      curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/metrics" || echo "scrape failed" >&2
    fi
    sleep 1
  done
  end="$(cpu_ns "$agent")"
  local rss hwm
  rss="$(status_kb "$agent" VmRSS)"
  hwm="$(status_kb "$agent" VmHWM)"
  kill -TERM "$agent"
  wait "$agent" 2>/dev/null || true
  agent=""
  echo "$(echo "($end - $start) / 1000000" | bc -l) $rss $hwm"
}

median() {
  sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}

echo "metrics cost: agent with $nproc idle workers, ${seconds}s windows, $rounds rounds," \
  "$(nproc) CPUs"
declare -A cpu rss hwm
for ((r = 1; r <= rounds; r++)); do
  for mode in off on; do
    read -r c m h < <(run "$mode")
    printf '  round %d metrics %-3s agent CPU %7.2f ms  RSS %5.1f MB  peak RSS %5.1f MB\n' \
      "$r" "$mode" "$c" "$(echo "$m / 1024" | bc -l)" "$(echo "$h / 1024" | bc -l)"
    cpu[$mode]+="$c "
    rss[$mode]+="$m "
    hwm[$mode]+="$h "
  done
done
for mode in off on; do
  label="without --metrics_port"
  [ "$mode" = on ] && label="with --metrics_port, 1 s scrape"
  c="$(tr ' ' '\n' <<<"${cpu[$mode]}" | grep . | median)"
  m="$(tr ' ' '\n' <<<"${rss[$mode]}" | grep . | median)"
  h="$(tr ' ' '\n' <<<"${hwm[$mode]}" | grep . | median)"
  printf '%-32s median agent CPU %.2f ms over %ss, RSS %.1f MB, peak RSS %.1f MB\n' "$label" \
    "$c" "$seconds" "$(echo "$m / 1024" | bc -l)" "$(echo "$h / 1024" | bc -l)"
done
