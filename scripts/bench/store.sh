#!/usr/bin/env bash
# store.sh: PyTorch 1.13's own TCPStore server next to `ddp-store serve`, in one run, driven by
# `ddp-bench store` at 64 clients, then again with 10,000 extra idle connections held open.
# Both servers get the same client and the same bytes (the 1.13 dialect, which torch's server
# requires). Prints a table of ops/s, p50 and p99 per server, and ddp-store's ops/s over torch's.
# `abuse` instead runs issue 15's misbehaving clients (tests/integration/store/store_abuse.py)
# against each server while a probe does GETNUMKEYS every 10 ms, and prints the probe's worst
# wait and p99 and the server's RSS (before, peak, after) per case.
#
# `compare OTHER` runs BUILD_DIR's ddp-store against another ddp-store binary (say, a build of an
# earlier commit) instead of torch, alternating runs ROUNDS (3) times, and adds the server's CPU
# time per request, which a loaded machine changes much less than ops/s.
#
# `auth` runs ddp-store without and with a job secret (--token_file, docs/security.md), alternating
# ROUNDS (3) times: one client opening and closing connections (the set-up time: TCP, the 2.x
# handshake, and ddprun's authentication when there is a secret), then CLIENTS authenticated or
# plain clients doing OPS; prints both and the differences.
#
#   scripts/bench/store.sh [abuse | auth | compare OTHER_DDP_STORE] [BUILD_DIR=build]
# Env: SECONDS_PER_RUN (5), CLIENTS (64), IDLE (10000), OPS ("add get mixed"); for abuse CASES
# (every case of store_abuse.py) and CASE_TIMEOUT (120 s: a server that stops answering).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode=throughput
if [ "${1:-}" = abuse ]; then mode=abuse; shift; fi
if [ "${1:-}" = auth ]; then mode=auth; shift; fi
if [ "${1:-}" = compare ]; then mode=compare; other="$(realpath "$2")"; shift 2; fi
build="$(cd "${1:-$here/../../build}" && pwd)"
seconds="${SECONDS_PER_RUN:-5}"
clients="${CLIENTS:-64}"
idle="${IDLE:-10000}"
ops="${OPS:-add get mixed}"
bench="$build/bin/ddp-bench"
work="$(mktemp -d /tmp/ddp-bench-store.XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

# Starts a server whose first stdout line is "listening on H:P" and waits for that line. Runs in
# this shell (not in $(...)), so that the cleanup trap knows the server's pid.
start_server() {
  local name="$1"; shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  for _ in $(seq 1 300); do
    grep -q '^listening on ' "$work/$name.out" 2>/dev/null && return
    sleep 0.05
  done
  echo "store.sh: $name did not start: $(cat "$work/$name.err")" >&2
  exit 1
}
addr_of() { awk '/^listening on /{print $3; exit}' "$work/$1.out"; }

if [ "$mode" = compare ]; then
  start_server other "$other" serve --host 127.0.0.1 --port 0
  start_server ddp-store "$build/bin/ddp-store" serve --host 127.0.0.1 --port 0
  ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  # One run against one server: "ops/s server-CPU-us-per-request".
  one() {
    local before after json
    before=$(ticks "$1")
    json=$("$bench" store --addr "$2" --clients "$clients" --seconds "$seconds" --op "$3" \
           --dialect 113 --json)
    after=$(ticks "$1")
    jq -r --argjson t $((after - before)) --argjson hz "$(getconf CLK_TCK)" --argjson s "$seconds" \
      '"\(.ops_per_s | floor) \($t / $hz * 1e6 / (.ops_per_s * $s) * 100 | floor / 100)"' <<<"$json"
  }
  echo "compare: $other against $build/bin/ddp-store, $clients clients, ${seconds}s, $(nproc) cores"
  printf '%-6s %5s | %11s %9s | %11s %9s | %6s\n' op round "other ops/s" "cpu us/op" \
    "this ops/s" "cpu us/op" ratio
  for op in $ops; do
    for round in $(seq 1 "${ROUNDS:-3}"); do
      read -r o_ops o_cpu <<<"$(one "${pids[0]}" "$(addr_of other)" "$op")"
      read -r t_ops t_cpu <<<"$(one "${pids[1]}" "$(addr_of ddp-store)" "$op")"
      printf '%-6s %5d | %11d %9.2f | %11d %9.2f | %6.2f\n' "$op" "$round" "$o_ops" "$o_cpu" \
        "$t_ops" "$t_cpu" "$(jq -n "$t_ops / $o_ops")"
    done
  done
  exit 0
fi

if [ "$mode" = auth ]; then
  head -c 32 /dev/urandom | base64 >"$work/job.token"
  chmod 600 "$work/job.token"
  start_server plain "$build/bin/ddp-store" serve --host 127.0.0.1 --port 0
  start_server secret "$build/bin/ddp-store" serve --host 127.0.0.1 --port 0 \
    --token_file "$work/job.token" --run_id bench
  # One run: "ops/s p50_us p99_us"; the secret's server gets authenticated clients.
  one() {
    local extra=()
    [ "$1" = secret ] && extra=(--token_file "$work/job.token" --run_id bench)
    "$bench" store --addr "$(addr_of "$1")" --clients "$2" --seconds "$seconds" --op "$3" \
      "${extra[@]}" --json | jq -r '"\(.ops_per_s | floor) \(.p50_us) \(.p99_us)"'
  }
  echo "auth: ddp-store without and with a job secret, ${seconds}s a run, $(nproc) cores"
  printf '%-7s %5s | %10s %7s %7s | %10s %7s %7s | %8s %7s\n' op round "plain op/s" p50us p99us \
    "auth op/s" p50us p99us "ops ratio" "+p50us"
  for op in connect $ops; do
    n=$clients
    [ "$op" = connect ] && n=1
    for round in $(seq 1 "${ROUNDS:-3}"); do
      read -r p_ops p_50 p_99 <<<"$(one plain "$n" "$op")"
      read -r a_ops a_50 a_99 <<<"$(one secret "$n" "$op")"
      printf '%-7s %5d | %10d %7d %7d | %10d %7d %7d | %8.2f %7d\n' "$op" "$round" "$p_ops" \
        "$p_50" "$p_99" "$a_ops" "$a_50" "$a_99" "$(jq -n "$a_ops / $p_ops")" $((a_50 - p_50))
    done
  done
  echo "connect: 1 client opening and closing connections (latency = set-up time);"
  echo "others: $clients clients, each connected (and authenticated) once before the clock starts"
  exit 0
fi

start_server torch /usr/bin/python3 -c '
import resource, signal, torch.distributed as dist
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print(f"listening on 127.0.0.1:{store.port}", flush=True)
signal.pause()'
start_server ddp-store "$build/bin/ddp-store" serve --host 127.0.0.1 --port 0
torch_addr=$(addr_of torch)
ddp_addr=$(addr_of ddp-store)

if [ "$mode" = abuse ]; then
  abuse="$here/../../tests/integration/store/store_abuse.py"
  cases="${CASES:-big_set flood append multi_get readers append_limit watcher}"
  echo "store abuse: a probe does GETNUMKEYS every 10 ms while one case misbehaves; $(nproc) cores"
  echo "worst/p99: the probe's waits during the whole case (ms); rss: server MB before/peak/after"
  printf '%-13s | %9s %7s %15s | %9s %7s %15s | %s\n' case "torch worst" p99 "rss" \
    "ddp worst" p99 "rss" "ddp-store outcome"
  # One case against one server, in its own process with a deadline; prints its JSON line.
  run_case() {
    timeout "${CASE_TIMEOUT:-120}" /usr/bin/python3 -u "$abuse" run "${2%:*}" "${2##*:}" "$1" "$3" \
      2>/dev/null | tail -1 || true
  }
  cell() {
    if [ -z "$1" ]; then printf '%9s %7s %15s' "stuck" "-" "-"; return; fi
    if jq -e '.error | test("timed out")' >/dev/null 2>&1 <<<"$1"; then
      printf '%9s %7s %15s' "stuck" "-" "-"; return  # the server stopped answering
    fi
    if jq -e .error >/dev/null <<<"$1"; then printf '%9s %7s %15s' "failed" "-" "-"; return; fi
    printf '%9.1f %7.1f %15s' "$(jq .worst_ms <<<"$1")" "$(jq .p99_ms <<<"$1")" \
      "$(jq -r '"\(.rss_before_mb|floor)/\(.rss_peak_mb|floor)/\(.rss_after_mb|floor)"' <<<"$1")"
  }
  for case_name in $cases; do
    case "$case_name" in
      append|multi_get|append_limit) t="" ; tcell=$(printf '%9s %7s %15s' "n/a" "-" "-") ;;
      *) t=$(run_case "${pids[0]}" "$torch_addr" "$case_name"); tcell=$(cell "$t") ;;
    esac
    d=$(run_case "${pids[1]}" "$ddp_addr" "$case_name")
    outcome=$(jq -c 'del(.case, .worst_ms, .p99_ms, .probes, .rss_before_mb, .rss_peak_mb,
                        .rss_after_mb) | with_entries(.value |= (if type == "number" then
                        (. * 100 | round / 100) else . end))' <<<"${d:-null}" 2>/dev/null || true)
    printf '%-13s | %s | %s | %s\n' "$case_name" "$tcell" "$(cell "$d")" "$outcome"
  done
  echo "n/a: PyTorch 1.13's server closes the connection on APPEND and MULTI_GET (2.0 commands)"
  echo "stuck: the server answered nothing for 30 s (the case gave up)"
  exit 0
fi

# CPU time (user+system, clock ticks) the server process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Runs the client against one server; prints its JSON with the server's CPU share of the run
# added as "server_cpu" (1.0 = one core busy all the time).
measure() {
  # Over the whole client run, idle connections' set-up included (--seconds counts only the
  # measured part).
  local pid="$1" addr="$2" op="$3" extra="$4" before after start end json
  before=$(cpu_ticks "$pid")
  start=$(date +%s.%N)
  json=$("$bench" store --addr "$addr" --clients "$clients" --seconds "$seconds" --op "$op" \
         --idle "$extra" --dialect 113 --json)
  end=$(date +%s.%N)
  after=$(cpu_ticks "$pid")
  jq -c --argjson ticks "$((after - before))" --argjson hz "$(getconf CLK_TCK)" \
    --argjson wall "$(jq -n "$end - $start")" '. + {server_cpu: ($ticks / $hz / $wall)}' <<<"$json"
}

echo "store benchmark: $clients clients, ${seconds}s per run, dialect 1.13, $(nproc) cores"
echo "torch 1.13 TCPStore at $torch_addr; ddp-store at $ddp_addr"
echo "cpu: the server's CPU share during the run (1.00 = one core); the client runs beside it"
printf '%-6s %-6s | %11s %7s %7s %5s | %11s %7s %7s %5s | %6s\n' op idle \
  "torch ops/s" "p50 us" "p99 us" cpu "ddp ops/s" "p50 us" "p99 us" cpu ratio
for extra in 0 "$idle"; do
  for op in $ops; do
    t=$(measure "${pids[0]}" "$torch_addr" "$op" "$extra")
    d=$(measure "${pids[1]}" "$ddp_addr" "$op" "$extra")
    printf '%-6s %-6s | %11.0f %7d %7d %5.2f | %11.0f %7d %7d %5.2f | %6.2f\n' "$op" "$extra" \
      "$(jq .ops_per_s <<<"$t")" "$(jq .p50_us <<<"$t")" "$(jq .p99_us <<<"$t")" \
      "$(jq .server_cpu <<<"$t")" \
      "$(jq .ops_per_s <<<"$d")" "$(jq .p50_us <<<"$d")" "$(jq .p99_us <<<"$d")" \
      "$(jq .server_cpu <<<"$d")" \
      "$(jq -n "$(jq .ops_per_s <<<"$d") / $(jq .ops_per_s <<<"$t")")"
  done
done
