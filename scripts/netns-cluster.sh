#!/usr/bin/env bash
# netns-cluster.sh — "nodes" for multi-node tests on one machine: network namespaces ddpn1..ddpnN,
# each with loopback up and eth0 = 10.213.0.<i>/24, joined by veth pairs (host side ddpv<i>) to
# the bridge ddpbr0 (10.213.0.254/24, so the root namespace reaches every node). Nothing routes
# off the bridge. Separate from the SLURM rig (ddpsl0, 10.214.0.0/16, ddpslurm<i>).
#
#   netns-cluster.sh up N        create nodes 1..N (idempotent; removes nodes above N)
#   netns-cluster.sh down        remove every node and the bridge (idempotent)
#   netns-cluster.sh exec I CMD  run CMD in node I's namespace
#   netns-cluster.sh cut I       take node I's link down (host-side veth), heal I brings it back
#   netns-cluster.sh addr I      print node I's address
#   netns-cluster.sh status      list nodes and link states
#
# DDP_NETNS_RIG=soak makes a second rig beside the first (namespaces ddps<i>, veths ddpw<i>,
# bridge ddpsbr0, 10.215.0.0/24), so the long soak (scripts/bench/soak.sh) runs while the tests
# use the first.
set -euo pipefail
case "${DDP_NETNS_RIG:-}" in
  "") BRIDGE=ddpbr0 PREFIX=10.213.0 NS=ddpn VETH=ddpv ;;
  soak) BRIDGE=ddpsbr0 PREFIX=10.215.0 NS=ddps VETH=ddpw ;;
  *) echo "netns-cluster: DDP_NETNS_RIG must be empty or 'soak', not '$DDP_NETNS_RIG'" >&2; exit 1 ;;
esac
die() { echo "netns-cluster: $*" >&2; exit 1; }
node_ns() { echo "$NS$1"; }
node_veth() { echo "$VETH$1"; }
valid_index() { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= 200)) || die "node index must be 1..200, got '$1'"; }
existing_nodes() { ip netns list | awk '{print $1}' | grep -E "^$NS[0-9]+\$" | sed "s/^$NS//" | sort -n || true; }
need_root() { [ "$(id -u)" = 0 ] || die "run as root (ip netns)"; }

remove_node() {
  local i=$1
  ip link del "$(node_veth "$i")" 2>/dev/null || true
  ip netns del "$(node_ns "$i")" 2>/dev/null || true
}

up() {
  local n=${1:-}
  valid_index "$n"
  need_root
  for i in $(existing_nodes); do ((i > n)) && remove_node "$i"; done
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$PREFIX.254/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((i = 1; i <= n; i++)); do
    local ns veth
    ns=$(node_ns "$i")
    veth=$(node_veth "$i")
    ip netns list | awk '{print $1}' | grep -qx "$ns" || ip netns add "$ns"
    if ! ip link show "$veth" >/dev/null 2>&1; then
      ip -n "$ns" link del eth0 2>/dev/null || true
      ip link add "$veth" type veth peer name eth0 netns "$ns"
    fi
    ip link set "$veth" master "$BRIDGE"
    ip link set "$veth" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr replace "$PREFIX.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

down() {
  need_root
  for i in $(existing_nodes); do remove_node "$i"; done
  ip link del "$BRIDGE" 2>/dev/null || true
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) up "${1:-}" ;;
  down) down ;;
  exec)
    valid_index "${1:-}"
    i=$1
    shift
    [ $# -gt 0 ] || die "exec needs a command"
    exec ip netns exec "$(node_ns "$i")" "$@" ;;
  cut) valid_index "${1:-}"; need_root; ip link set "$(node_veth "$1")" down ;;
  heal) valid_index "${1:-}"; need_root; ip link set "$(node_veth "$1")" up ;;
  addr) valid_index "${1:-}"; echo "$PREFIX.$1" ;;
  status)
    for i in $(existing_nodes); do
      state=$(cat "/sys/class/net/$(node_veth "$i")/operstate" 2>/dev/null || echo missing)
      echo "node $i ns=$(node_ns "$i") addr=$PREFIX.$i link=$state"
    done ;;
  *) die "usage: netns-cluster.sh up N | down | exec I CMD... | cut I | heal I | addr I | status" ;;
esac
