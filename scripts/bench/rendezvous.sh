#!/usr/bin/env bash
# rendezvous.sh — c10d and etcd rendezvous figures on loopback (docs/BENCHMARKS.md).
#
#   rendezvous.sh scale K [K...]   K ddprun agents (--nnodes=K, one trivial worker each): seconds
#                                  from the first agent's start to every agent's worker running
#   rendezvous.sh torchrun K       the same with torchrun 1.13 (PET_REDIRECTS=9:1 PET_TEE=9:1)
#   rendezvous.sh floor K [K...]   the machine's floor for the same figure: K copies of
#                                  `ddp-bench-stamp --as-agent` (a static program that starts the
#                                  same worker and waits; no rendezvous), started by the same
#                                  launcher
#   rendezvous.sh per_agent K [K...]  as scale, with each agent under `perf stat --no-inherit`:
#                                  the median over the K agents of one agent's own CPU time, page
#                                  faults and context switches (its guard and worker not counted)
#   rendezvous.sh simulate K [K...]  `ddp-bench rendezvous --simulate K` (no processes per member:
#                                  K real c10d members as coroutines over a few processes against
#                                  ddp-store serve); one row per K: formation, requests and bytes
#                                  per member per round (store and members' CPU), heartbeat load,
#                                  loss. SIM_ARGS adds flags
#   rendezvous.sh node_loss        3 network-namespace nodes (root; take the netns lock) running
#                                  real PyTorch gloo DDP workers that checkpoint and resume
#                                  (--nnodes=2:3 --max_restarts=3, keep_alive_interval=1,
#                                  keep_alive_max_attempt=2); node 3 dies (every process in its
#                                  namespace SIGKILLed) at each of
#                                  OFFSETS s after an epoch barrier (default 0.1 0.5 0.9 1.3 1.7),
#                                  a fresh job per kill: seconds from SIGKILL to both survivors'
#                                  new workers past init_process_group, and restarts spent; for
#                                  each of LAUNCHERS (default "ddprun torchrun": torchrun 1.13 via
#                                  ../shared/tools/torchrun-fixed). scripts/bench/node_loss_bench.py
#   rendezvous.sh node_loss_sleep  3 agents on loopback with sleep workers (--nnodes=2:3; c10d:
#                                  keep_alive_interval=1,keep_alive_max_attempt=2; etcd:
#                                  ETCD_LOSS_CONF, default lease_ttl=10, etcd's default); SIGKILL
#                                  one that does not host a store: seconds until both survivors
#                                  run restarted workers
#   rendezvous.sh node_loss_host   the same, killing the agent at group rank 0 (etcd: the host of
#                                  the workers' store; c10d cannot lose it)
#   rendezvous.sh etcd_profile K [K...]  scale with etcd, then what the run cost etcd (its members'
#                                  /metrics before and after): calls per agent by method, watch
#                                  events per agent, etcd's CPU seconds beside the agents' own
# Env: BUILD (default build), PORT (default 29611),
#   BACKENDS="c10d" (default), "etcd", or "c10d etcd" for both in one run: etcd runs on a
#     3-member etcd 3.4 cluster on loopback that the script starts (scripts/etcd-cluster.sh up
#     ETCD_BASE, default 23990) and stops,
#   WORKER=stamp (default: build/bin/ddp-bench-stamp, one static exec) or sh (`/bin/sh -c 'date
#     ...; sleep'`, three execs a worker: the worker of the oldest figures in docs/BENCHMARKS.md),
#   LAUNCHER=spawn (default: one python3 process starts every agent with posix_spawn) or bash
#     (`agent &` in a bash loop: a fork of bash per agent, the oldest figures' harness).
# Each worker writes its start time to a file named after its RANK and WORLD_SIZE; figures come
# from those files, not from logs. On one 2-core machine the agents, their workers and the
# launcher share the cores: the harness's own process creation counts in every figure.
set -euo pipefail
BUILD=${BUILD:-build}
BACKENDS=${BACKENDS:-c10d}
ETCD_BASE=${ETCD_BASE:-23990}
ETCD_SCRIPT=$(cd "$(dirname "$0")/.." && pwd)/etcd-cluster.sh
DDPRUN=$(cd "$BUILD/bin" && pwd)/ddprun
PORT=${PORT:-29611}
WORK=$(mktemp -d /tmp/ddp-bench-rdzv.XXXXXX)
ETCD_ENDPOINTS=""
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  if [ -z "${KEEP_WORK:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
  if [ -n "$ETCD_ENDPOINTS" ]; then "$ETCD_SCRIPT" down "$ETCD_BASE"; fi
}
trap cleanup EXIT
if [ "${1:-}" = node_loss_host ] || [ "${1:-}" = etcd_profile ]; then BACKENDS=etcd; fi
if [[ " $BACKENDS " == *" etcd "* ]]; then ETCD_ENDPOINTS=$("$ETCD_SCRIPT" up "$ETCD_BASE"); fi
BACKEND=c10d  # the backend of the run in progress

# The rendezvous flags of BACKEND for a job called $1 (a fresh id per run: etcd keeps state).
rdzv_args() {
  case "$BACKEND" in
    c10d) echo "--rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=$1" ;;
    etcd) echo "--rdzv_backend=etcd --rdzv_endpoint=$ETCD_ENDPOINTS --rdzv_id=$1-$$-$RANDOM" ;;
  esac
}
ulimit -n "$(ulimit -Hn)"

now() { date +%s.%N; }
# The worker records when it started.
STAMP=$(cd "$BUILD/bin" && pwd)/ddp-bench-stamp
WORKER_NAME=${WORKER:-stamp}
case "$WORKER_NAME" in
  stamp) WORKER=("$STAMP") ;;
  sh) WORKER=(/bin/sh -c 'date +%s.%N > "$0/world${WORLD_SIZE}_rank${RANK}"; sleep "${1:-0}"') ;;
  *) echo "rendezvous.sh: WORKER must be stamp or sh, not '$WORKER'" >&2; exit 2 ;;
esac
LAUNCHER=${LAUNCHER:-spawn}
case "$LAUNCHER" in
  spawn | bash) ;;
  *) echo "rendezvous.sh: LAUNCHER must be spawn or bash, not '$LAUNCHER'" >&2; exit 2 ;;
esac

# spawn_all K OUT RANK_ENV COMMAND...: starts K copies of COMMAND (stdout to /dev/null, stderr to
# OUT.agent<i>.log) with posix_spawn from one python3 process, copy i with RANK=i and
# WORLD_SIZE=K in its environment when RANK_ENV is 1; prints the time it started the first and the
# last, then waits for all and prints how many exited non-zero and their CPU seconds (each with
# the children it waited for: its guard and worker).
spawn_all() {
  python3 - "$@" <<'PY'
import os, sys, time
k, out, rank_env, command = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
pids = []
first = time.time()
for i in range(k):
    log = os.open(f"{out}.agent{i}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    actions = [(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
               (os.POSIX_SPAWN_DUP2, log, 2)]
    env = dict(os.environ, RANK=str(i), WORLD_SIZE=str(k)) if rank_env else os.environ
    pids.append(os.posix_spawn(command[0], command, env, file_actions=actions))
    os.close(log)
print(f"{first:.6f}\n{time.time():.6f}", flush=True)
failed, cpu = 0, 0.0
for pid in pids:
    _, status, usage = os.wait4(pid, 0)
    failed += status != 0
    cpu += usage.ru_utime + usage.ru_stime
print(failed)
print(f"{cpu:.2f}")
PY
}

run_agents() {  # run_agents LAUNCHER K OUT [extra ddprun args...]; waits for every agent
  local launcher=$1 k=$2 out=$3
  shift 3
  local command failed rank_env=0
  local rdzv
  read -r -a rdzv <<<"$(rdzv_args "bench$k")"
  local agent_args=(--nnodes="$k" --nproc_per_node=1 "${rdzv[@]}" "$@"
                    --no_python "${WORKER[@]}" "$out")
  case "$launcher" in
    ddprun) command=("$DDPRUN" "${agent_args[@]}") ;;
    per_agent) command=(/bin/sh -c 'exec perf stat --no-inherit -x, -o "$0/perf.$$" \
                          -e task-clock,page-faults,context-switches -- "$@"' "$out.perf"
                        "$DDPRUN" "${agent_args[@]}") ;;
    torchrun) command=(/usr/bin/env PET_REDIRECTS=9:1 PET_TEE=9:1 /usr/bin/torchrun
                       "${agent_args[@]}") ;;
    floor) command=("$STAMP" --as-agent "$out") rank_env=1 ;;
  esac
  if [ "$LAUNCHER" = spawn ]; then
    local result
    mapfile -t result < <(spawn_all "$k" "$out" "$rank_env" "${command[@]}")
    FIRST=${result[0]} LAUNCHED=${result[1]} failed=${result[2]} AGENTS_CPU=${result[3]}
  else
    local pids=()
    FIRST=$(now)
    for ((i = 0; i < k; i++)); do
      (
        if [ "$rank_env" = 1 ]; then export RANK=$i WORLD_SIZE=$k; fi
        exec "${command[@]}"
      ) >/dev/null 2>"$out.agent$i.log" &
      pids+=($!)
    done
    LAUNCHED=$(now) AGENTS_CPU=""
    failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  fi
  [ "$failed" = 0 ] || echo "  warning: $failed agent(s) exited non-zero (logs in $out.agent*.log)" >&2
}

latest_start() { cat "$1"/world"$2"_rank* | sort -n | tail -1; }

scale() {  # scale LAUNCHER K
  local launcher=$1 k=$2 out="$WORK/$1-$BACKEND-$2"
  mkdir -p "$out"
  run_agents "$launcher" "$k" "$out"
  local t0=$FIRST worker=$WORKER_NAME
  [ "$launcher" = floor ] && worker=stamp
  local started
  started=$(ls "$out" | grep -c "^world${k}_rank" || true)
  local last
  last=$(latest_start "$out" "$k")
  local label=$launcher
  [ "$launcher" = ddprun ] && label="ddprun $BACKEND"
  printf '%-8s K=%-5d [%s worker, %s launcher] workers started %d/%d  first agent start -> last worker start: %.2f s (last agent launched at %.2f s%s)\n' \
    "$label" "$k" "$worker" "$LAUNCHER" "$started" "$k" "$(echo "$last - $t0" | bc -l)" "$(echo "$LAUNCHED - $t0" | bc -l)" \
    "${AGENTS_CPU:+; agents CPU $AGENTS_CPU s}"
  PORT=$((PORT + 1))
}

node_loss() {
  local launcher
  for launcher in ${LAUNCHERS:-ddprun torchrun}; do
    python3 "$(dirname "$0")/node_loss_bench.py" "$launcher" "$(dirname "$DDPRUN")" \
      ${OFFSETS:-0.1 0.5 0.9 1.3 1.7}
  done
}

node_loss_sleep() {  # node_loss_sleep member|host
  local which=$1 out="$WORK/loss-$BACKEND-$1"
  mkdir -p "$out"
  local pids=() rdzv conf=keep_alive_interval=1,keep_alive_max_attempt=2
  read -r -a rdzv <<<"$(rdzv_args loss)"
  [ "$BACKEND" = etcd ] && conf=${ETCD_LOSS_CONF:-lease_ttl=10}
  for i in 0 1 2; do
    "$DDPRUN" --nnodes=2:3 --nproc_per_node=1 "${rdzv[@]}" --rdzv_conf="$conf" --log_level=info \
      --no_python /bin/sh -c 'date +%s.%N > "$0/world${WORLD_SIZE}_rank${RANK}"; [ "$WORLD_SIZE" = 3 ] && exec sleep 60; exit 0' \
      "$out" >/dev/null 2>"$out.agent$i.log" &
    pids+=($!)
  done
  until [ "$(ls "$out" | grep -c '^world3_' || true)" = 3 ]; do sleep 0.05; done
  # member: an agent that does not host the store (c10d: the rendezvous store's host; etcd:
  # group rank 0, which hosts the workers' store); host: etcd's group rank 0.
  local victim hosts
  if [ "$BACKEND" = c10d ]; then hosts=$(grep -l "hosts the store" "$out".agent*.log || true)
  else hosts=$(grep -l "group_rank=0 " "$out".agent*.log || true); fi
  if [ "$which" = host ]; then
    victim=$(echo "$hosts" | head -1)
  else
    victim=$(ls "$out".agent*.log | grep -vxF "$hosts" | head -1)
  fi
  victim=$(echo "$victim" | sed 's/.*agent\([0-9]*\)\.log/\1/')
  local t0
  t0=$(now)
  kill -9 "${pids[$victim]}"
  unset "pids[$victim]"
  wait "${pids[@]}" || true
  local last
  last=$(latest_start "$out" 2)
  printf 'node loss %s (%s, %s): SIGKILL -> both survivors restarted: %.2f s\n' \
    "$BACKEND" "$which" "$conf" "$(echo "$last - $t0" | bc -l)"
  PORT=$((PORT + 1))
}

# per_agent K: the K agents' own costs, each counted by perf stat; prints the medians.
per_agent() {
  local k=$1
  mkdir -p "$WORK/per_agent-$BACKEND-$k.perf"
  scale per_agent "$k"
  python3 - "$WORK/per_agent-$BACKEND-$k.perf" "$k" "$BACKEND" <<'PY'
import os, statistics, sys
folder, k, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
counts = {}
for name in os.listdir(folder):
    for line in open(os.path.join(folder, name)):
        fields = line.strip().split(",")
        if len(fields) > 3 and fields[0] and fields[0][0].isdigit():
            counts.setdefault(fields[2], []).append(float(fields[0]))
cpu = counts.get("task-clock", [])
print(f"per agent {backend} K={k:<5d} ({len(cpu)} agents counted) median: "
      f"{statistics.median(cpu):.1f} ms CPU, "
      f"{statistics.median(counts['page-faults']):.0f} page faults, "
      f"{statistics.median(counts['context-switches']):.0f} context switches")
PY
}

# etcd_metrics: every etcd member's /metrics, one "member name value" line per sample.
etcd_metrics() {
  local m
  for m in ${ETCD_ENDPOINTS//,/ }; do
    curl -s "http://$m/metrics" | grep -v '^#' | sed "s|^|$m |"
  done
}

# etcd_profile K: scale with etcd, and what the K agents cost etcd from start to exit: calls by
# gRPC method (the gateway turns each HTTP call into one), watch events sent, etcd's CPU beside
# the agents' own.
etcd_profile() {
  local k=$1
  BACKEND=etcd
  etcd_metrics >"$WORK/metrics-before-$k"
  scale ddprun "$k"
  etcd_metrics >"$WORK/metrics-after-$k"
  python3 - "$WORK/metrics-before-$k" "$WORK/metrics-after-$k" "$k" "$AGENTS_CPU" <<'PY'
import re, sys
def load(path):
    out = {}
    for line in open(path):
        member, _, rest = line.partition(" ")
        name, _, value = rest.strip().rpartition(" ")
        try:
            out[(member, name)] = float(value)
        except ValueError:
            pass
    return out
before, after, k, agents_cpu = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
calls, cpu, events = {}, 0.0, 0.0
for (member, name), value in after.items():
    delta = value - before.get((member, name), 0.0)
    m = re.match(r'grpc_server_(handled|started)_total\{.*grpc_method="(\w+)".*grpc_type="(\w+)"', name)
    if m and ((m[1] == "handled" and m[3] == "unary") or (m[1] == "started" and m[3] != "unary")):
        calls[m[2]] = calls.get(m[2], 0) + delta
    elif name == "process_cpu_seconds_total":
        cpu += delta
    elif name == "etcd_debugging_mvcc_events_total":
        events += delta
per = ", ".join(f"{n} {v / k:.2f}" for n, v in sorted(calls.items()) if v)
print(f"etcd     K={k:<5d} calls per agent: {per}; watch events per agent {events / k:.1f}; "
      f"CPU: etcd {cpu:.2f} s (3 members), agents {agents_cpu} s")
PY
}

# simulate K...: one table, a row per K, from ddp-bench rendezvous --simulate K --json.
simulate() {
  printf '%7s %5s %4s | %8s %8s %7s %7s %6s %6s | %9s %7s %6s | %6s %8s %8s\n' K procs conn \
    formed_s req/mbr sent_B recv_B cpu_s mcpu_s hb_req/s req/mbr/s cpu_% seen_s reform_s req/surv
  for k in "$@"; do
    # shellcheck disable=SC2086
    "$BUILD/bin/ddp-bench" rendezvous --simulate "$k" ${SIM_ARGS:-} --json \
      >"$WORK/simulate-$k.json" 2>"$WORK/simulate-$k.log" || true
    if [ ! -s "$WORK/simulate-$k.json" ]; then  # it failed before the first round's figures
      echo "K=$k failed:" >&2
      tail -5 "$WORK/simulate-$k.log" >&2
      continue
    fi
    python3 - "$WORK/simulate-$k.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rd, hb, loss = r["round"], r["heartbeat"], r["loss"]
print(f"{r['k']:7d} {r['procs']:5d} {r['members_per_connection']:4d} | "
      f"{r['formed_s']:8.2f} {rd['requests_per_member']:8.2f} "
      f"{rd['request_bytes_per_member']:7.0f} {rd['reply_bytes_per_member']:7.0f} "
      f"{rd['store_cpu_s']:6.2f} {rd.get('members_cpu_s', 0):6.2f} | {hb['requests_per_s']:9.0f} "
      f"{hb['requests_per_member_per_s']:7.3f} {100 * hb['store_cpu_share']:6.1f} | "
      f"{loss['detected_s']:6.2f} {loss['reform_after_detection_s']:8.2f} "
      f"{loss['round']['requests_per_member']:8.2f}")
if r["error"]:
    print(f"        K={r['k']} stopped early: {r['error']}")
PY
  done
}

case "${1:-}" in
  simulate) shift; simulate "$@" ;;
  per_agent) shift; for k in "$@"; do for BACKEND in $BACKENDS; do per_agent "$k"; done; done ;;
  scale) shift; for k in "$@"; do for BACKEND in $BACKENDS; do scale ddprun "$k"; done; done ;;
  torchrun) shift; for k in "$@"; do scale torchrun "$k"; done ;;
  floor) shift; for k in "$@"; do scale floor "$k"; done ;;
  etcd_profile) shift; for k in "$@"; do etcd_profile "$k"; done ;;
  node_loss) node_loss ;;
  node_loss_sleep) for BACKEND in $BACKENDS; do node_loss_sleep member; done ;;
  node_loss_host) BACKEND=etcd; node_loss_sleep host ;;
  *)
    echo "usage: rendezvous.sh scale K... | torchrun K... | floor K... | per_agent K... |" \
      "simulate K... | node_loss | node_loss_sleep | node_loss_host | etcd_profile K..." >&2
    exit 2
    ;;
esac
