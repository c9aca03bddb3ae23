#!/usr/bin/env bash
# Hang detection figures. (1) Time from hang to report: ddp-train with rank 1 hung at step 20
# (--hang_at_step), under ddprun --hang_timeout=T; the event log's hang event gives idle_ms (the
# hung rank's time without progress when the detector named it) and report_ms (collecting and
# printing the stacks); their sum is the time from the hang to the printed report (goal: T + 2 s).
# (2) The cost of progress publishing: per collective and per read (ddp-bench progress), and on
# ddp-train's samples/s: paired runs, alternating, of 2 ranks x 1 epoch with DDPRUN_PROGRESS_FILE
# as ddprun sets it and with it removed (`env -u`), medians compared (goal: under 1 %).
# Usage: scripts/bench/hangs.sh [BUILD_DIR=build] [PAIRS=5] [TIMEOUTS="3 10"]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
pairs="${2:-5}"
timeouts="${3:-3 10}"
export OMP_NUM_THREADS=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "== time from hang to report (ddp-train, 2 ranks, rank 1 hangs at step 20)"
printf '%-16s %10s %10s %12s %10s\n' "--hang_timeout" "idle_ms" "report_ms" "hang->report" "goal"
for t in $timeouts; do
  "$build/bin/ddprun" --nproc_per_node=2 --hang_timeout="$t" --event_log="$tmp/ev.jsonl" \
    --log_dir="$tmp/logs" --no_python "$build/bin/ddp-train" --max_steps 40 --hang_at_step 20 \
    --hang_rank 1 >/dev/null 2>&1 || true
  line="$(grep '"event":"hang"' "$tmp/ev.jsonl")"
  idle="$(sed -n 's/.*"idle_ms":\([0-9]*\).*/\1/p' <<<"$line")"
  report="$(sed -n 's/.*"report_ms":\([0-9]*\).*/\1/p' <<<"$line")"
  printf '%-16s %10s %10s %11.2fs %9ss\n' "$t" "$idle" "$report" \
    "$(bc -l <<<"($idle + $report) / 1000")" "$((t + 2))"
done

echo "== progress publishing, per collective and per read"
"$build/bin/ddp-bench" progress
echo "== progress publishing: ddp-train 2 ranks x 1 epoch, $pairs alternating pairs"
sps() { grep '^summary ' | tail -1 | tr ' ' '\n' | sed -n 's/^samples_per_s=//p'; }
with=(); without=()
for ((i = 0; i < pairs; i++)); do
  with+=("$("$build/bin/ddprun" --nproc_per_node=2 --no_python "$build/bin/ddp-train" \
    --epochs 1 --log_every 1000 2>&1 | sps)")
  without+=("$("$build/bin/ddprun" --nproc_per_node=2 --no_python env -u DDPRUN_PROGRESS_FILE \
    "$build/bin/ddp-train" --epochs 1 --log_every 1000 2>&1 | sps)")
  echo "pair $i: with ${with[-1]}  without ${without[-1]} samples/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mw="$(median "${with[@]}")"; mo="$(median "${without[@]}")"
printf 'median samples/s: with progress %s, without %s, cost %.2f %%\n' "$mw" "$mo" \
  "$(bc -l <<<"($mo - $mw) / $mo * 100")"
