#!/usr/bin/env bash
# cluster-down.sh — stops what cluster-up.sh started: jobs, slurmd per node, slurmctld, munged if
# we started it, the node namespaces, the bridge and the /etc/hosts block. Kills only by the pid
# files our daemons wrote (and processes inside our own namespaces). Safe when nothing is up.
set -uo pipefail
source "$(dirname "$0")/cluster-env.sh"
[ "$(id -u)" = 0 ] || { echo "cluster-down: run as root" >&2; exit 1; }
if ddpsl_alive "$DDPSL_DIR/slurmctld.pid"; then
  scancel --quiet --full -u root 2>/dev/null || true
  # Why wait for the queue to empty: a slurmd stopped while its job is still COMPLETING takes the
  # whole 10 s below to exit; the job itself leaves the queue about 2 s after its processes end.
  for _ in $(seq 100); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
fi
pidfiles=("$DDPSL_DIR"/slurmd-*.pid "$DDPSL_DIR/slurmctld.pid" "$DDPSL_DIR/munged.pid")
pids=()
for f in "${pidfiles[@]}"; do
  [ -f "$f" ] || continue
  pid=$(cat "$f"); rm -f "$f"
  kill "$pid" 2>/dev/null && pids+=("$pid")
done
# Why the wait: slurm daemons take ~2 s after SIGTERM; all are stopped in parallel, then KILLed.
for _ in $(seq 100); do
  left=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
  [ $left = 0 ] && break; sleep 0.1
done
for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
# Job leftovers (slurmstepd, workers) still live in the node namespaces: end them there.
for ns in $(ip netns list | awk '{print $1}' | grep -E '^ddpslurm[0-9]+$' || true); do
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
done
ip link del "$DDPSL_BRIDGE" 2>/dev/null || true
if grep -qF "$DDPSL_HOSTS_BEGIN" /etc/hosts; then
  tmp=$(mktemp); ddpsl_strip_hosts >"$tmp"; cat "$tmp" >/etc/hosts; rm -f "$tmp"
fi
rm -rf "$DDPSL_DIR"
echo "cluster-down: stopped"
