#!/usr/bin/env bash
# etcd-cluster.sh — a 3-member etcd 3.4 cluster (Debian's etcd-server) on loopback, for the etcd
# rendezvous tests, benchmarks and demos.
#
#   etcd-cluster.sh up [BASE]        start members m0 m1 m2: client ports BASE, BASE+2, BASE+4,
#                                    peer ports one above each; prints the --rdzv_endpoint list
#   etcd-cluster.sh down [BASE]      stop every member and delete the data
#   etcd-cluster.sh kill BASE N      SIGKILL member N (0..2), as a crash
#   etcd-cluster.sh endpoints [BASE] print the member list "127.0.0.1:BASE,...:BASE+2,...:BASE+4"
#
# BASE defaults to 23790. Data and logs live in /tmp/ddprun-etcd-BASE/ (wiped on "up").
# Needs etcd-server (scripts/setup.sh installs it). "up" waits until the cluster has a leader.
# The three members share this machine's cores: each runs with GOMAXPROCS = a third of them (at
# least 1), where Go's default (every core, for each member) has three schedulers spinning
# against each other; ETCD_GOMAXPROCS overrides it.
set -euo pipefail
cmd=${1:-up}
BASE=${2:-23790}
DIR=/tmp/ddprun-etcd-$BASE
N=3
GOMAXPROCS_EACH=${ETCD_GOMAXPROCS:-$(( $(nproc) / N > 0 ? $(nproc) / N : 1 ))}

client_port() { echo $((BASE + 2 * $1)); }
peer_port() { echo $((BASE + 2 * $1 + 1)); }
endpoints() {
  local list=""
  for i in $(seq 0 $((N - 1))); do list+="${list:+,}127.0.0.1:$(client_port "$i")"; done
  echo "$list"
}
stop_member() {  # stop_member I SIGNAL
  local pidf=$DIR/m$1.pid
  [[ -f $pidf ]] || return 0
  local pid; pid=$(cat "$pidf")
  kill "-$2" "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidf"
}
has_leader() {  # any member answers a linearizable read
  ETCDCTL_API=3 etcdctl --endpoints "$(endpoints)" --command-timeout=1s get /ddprun-probe \
    >/dev/null 2>&1
}

case $cmd in
up)
  if ! command -v etcd >/dev/null; then
    echo "etcd-cluster: etcd is missing (apt-get install etcd-server)" >&2
    exit 1
  fi
  for i in $(seq 0 $((N - 1))); do stop_member "$i" TERM; done
  rm -rf "$DIR"; mkdir -p "$DIR"
  cluster=""
  for i in $(seq 0 $((N - 1))); do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$(peer_port "$i")"
  done
  for i in $(seq 0 $((N - 1))); do
    url=http://127.0.0.1:$(client_port "$i")
    peer=http://127.0.0.1:$(peer_port "$i")
    GOMAXPROCS=$GOMAXPROCS_EACH setsid etcd --name "m$i" --data-dir "$DIR/m$i" \
      --listen-client-urls "$url" --advertise-client-urls "$url" \
      --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
      --initial-cluster "$cluster" --initial-cluster-token "ddprun-$BASE" \
      --initial-cluster-state new --log-level warn --logger zap \
      </dev/null >"$DIR/m$i.log" 2>&1 &
    echo $! >"$DIR/m$i.pid"
  done
  for _ in $(seq 200); do has_leader && break; sleep 0.05; done
  has_leader || { echo "etcd-cluster: no leader after 10 s; see $DIR/m*.log" >&2; exit 1; }
  endpoints
  ;;
down)
  for i in $(seq 0 $((N - 1))); do stop_member "$i" TERM; done
  rm -rf "$DIR"
  ;;
kill)
  [[ ${3:-} =~ ^[0-2]$ ]] || { echo "usage: $0 kill BASE N (N in 0..2)" >&2; exit 2; }
  stop_member "$3" KILL
  ;;
endpoints) endpoints ;;
*) echo "usage: $0 up|down|kill|endpoints [BASE] [N]" >&2; exit 2 ;;
esac
