#!/usr/bin/env bash
# etcd-cluster.sh — a 3-member etcd 3.4 cluster (Debian's etcd-server) on loopback, for the etcd
# rendezvous tests, benchmarks and demos.
#
#   etcd-cluster.sh up [BASE] [--tls CERTDIR]
#                                    start members m0 m1 m2: client ports BASE, BASE+2, BASE+4,
#                                    peer ports one above each; prints the --rdzv_endpoint list.
#                                    --tls: clients speak https and must show a certificate signed
#                                    by CERTDIR/ca.crt (mutual TLS); the members serve
#                                    CERTDIR/server.crt ("certs" makes such a directory)
#   etcd-cluster.sh certs DIR [IP...] a throwaway CA (DIR/ca.crt), a server certificate for
#                                    127.0.0.1, localhost and each IP (DIR/server.crt, .key) and a
#                                    client certificate (DIR/client.crt, .key), with openssl
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
TLS=""
if [[ $cmd == up && ${3:-} == --tls ]]; then
  TLS=${4:?"--tls needs a certificate directory"}
  TLS=$(cd "$TLS" && pwd)
fi
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
  local tls=()
  [[ -n $TLS ]] && tls=(--cacert "$TLS/ca.crt" --cert "$TLS/client.crt" --key "$TLS/client.key")
  ETCDCTL_API=3 etcdctl --endpoints "$(endpoints)" "${tls[@]}" --command-timeout=1s \
    get /ddprun-probe >/dev/null 2>&1
}
certs() {  # certs DIR [IP...]: EC P-256 keys, valid two days
  local dir=$1; shift
  local san="IP:127.0.0.1,DNS:localhost"
  for ip in "$@"; do san+=",IP:$ip"; done
  mkdir -p "$dir"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 2 \
    -subj "/CN=ddprun throwaway CA $RANDOM" 2>/dev/null
  sign() {  # sign NAME CN EXTENSIONS
    openssl req -new "${ec[@]}" -keyout "$dir/$1.key" -out "$dir/$1.csr" -subj "/CN=$2" 2>/dev/null
    openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
      -days 2 -out "$dir/$1.crt" -extfile <(printf '%b' "$3") 2>/dev/null
    rm -f "$dir/$1.csr"
  }
  # The gateway inside each member dials its own gRPC port with the server certificate, so it
  # is a client certificate too.
  sign server etcd "subjectAltName=$san\nextendedKeyUsage=serverAuth,clientAuth"
  sign client ddprun "extendedKeyUsage=clientAuth"
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
  scheme=http tls=()
  if [[ -n $TLS ]]; then
    scheme=https
    tls=(--cert-file "$TLS/server.crt" --key-file "$TLS/server.key" --client-cert-auth
         --trusted-ca-file "$TLS/ca.crt")
  fi
  for i in $(seq 0 $((N - 1))); do
    url=$scheme://127.0.0.1:$(client_port "$i")
    peer=http://127.0.0.1:$(peer_port "$i")
    GOMAXPROCS=$GOMAXPROCS_EACH setsid etcd --name "m$i" --data-dir "$DIR/m$i" \
      --listen-client-urls "$url" --advertise-client-urls "$url" \
      --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
      --initial-cluster "$cluster" --initial-cluster-token "ddprun-$BASE" \
      --initial-cluster-state new --log-level warn --logger zap "${tls[@]}" \
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
certs)
  [[ -n ${2:-} ]] || { echo "usage: $0 certs DIR [IP...]" >&2; exit 2; }
  certs "${@:2}"
  ;;
*) echo "usage: $0 up [BASE] [--tls DIR] | down|endpoints [BASE] | kill BASE N | certs DIR [IP...]" >&2; exit 2 ;;
esac
