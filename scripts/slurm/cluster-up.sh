#!/usr/bin/env bash
# cluster-up.sh [N] — a real SLURM cluster on this machine for the tests: munged and slurmctld in
# the root network namespace, N (default 2) slurmd "nodes" ddpslurm0..N-1, each in its own network
# namespace (10.214.0.10+i on bridge ddpsl0) and UTS namespace. The config lives in
# /run/ddp-slurm/slurm.conf: export SLURM_CONF=/run/ddp-slurm/slurm.conf to use srun/sbatch.
# Idempotent: when already up with N nodes it only checks. Stop with cluster-down.sh.
set -euo pipefail
N=${1:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/cluster-env.sh"
die() { echo "cluster-up: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"
[[ $N =~ ^[0-9]+$ ]] && ((N >= 1 && N <= 200)) || die "N must be 1..200, got '$N'"
for tool in slurmctld slurmd munged srun; do command -v $tool >/dev/null || die "missing $tool (scripts/setup.sh installs it)"; done
if [ -f "$SLURM_CONF" ] && ! grep -q "^# nodes=$N\$" "$SLURM_CONF"; then "$HERE/cluster-down.sh" >/dev/null; fi
mkdir -p "$DDPSL_DIR/state" "$DDPSL_DIR/log"

# munge: reuse a running munged; otherwise start our own (and remember its pid to stop it).
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    (umask 077; dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 status=none)
    chown munge:munge /etc/munge/munge.key
  fi
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/ddp-slurm-munged.pid
  cp /run/munge/ddp-slurm-munged.pid "$DDPSL_DIR/munged.pid"
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi

# Network: a bridge in the root namespace, one veth per node namespace.
ip link show "$DDPSL_BRIDGE" >/dev/null 2>&1 || { ip link add "$DDPSL_BRIDGE" type bridge; ip addr add "$DDPSL_HOST_IP/16" dev "$DDPSL_BRIDGE"; }
ip link set "$DDPSL_BRIDGE" up
for ((i = 0; i < N; i++)); do
  ns=$(ddpsl_node "$i")
  ip netns list | grep -qw "^$ns" || ip netns add "$ns"
  ip link show "${DDPSL_BRIDGE}v$i" >/dev/null 2>&1 || { ip link add "${DDPSL_BRIDGE}v$i" type veth peer name eth0 netns "$ns"; ip link set "${DDPSL_BRIDGE}v$i" master "$DDPSL_BRIDGE"; }
  ip link set "${DDPSL_BRIDGE}v$i" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr replace "$(ddpsl_addr "$i")/16" dev eth0
  ip -n "$ns" link set eth0 up
done
# Why /etc/hosts: nsenter does not apply /etc/netns/*, and MASTER_ADDR is a node name.
tmp=$(mktemp)
ddpsl_strip_hosts >"$tmp"   # a separate command so that set -e stops before /etc/hosts is touched
{ echo "$DDPSL_HOSTS_BEGIN"; echo "$DDPSL_HOST_IP ddpslurmctl"
  for ((i = 0; i < N; i++)); do echo "$(ddpsl_addr "$i") $(ddpsl_node "$i")"; done; echo "$DDPSL_HOSTS_END"; } >>"$tmp"
cat "$tmp" >/etc/hosts; rm -f "$tmp"

addrs=$(for ((i = 0; i < N; i++)); do ddpsl_addr "$i"; done | paste -sd,)
cat >"$SLURM_CONF" <<CONF
# nodes=$N
# written by scripts/slurm/cluster-up.sh
ClusterName=ddpslurm
SlurmctldHost=$(hostname -s)($DDPSL_HOST_IP)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=$DDPSL_CTL_PORT
SlurmdPort=$DDPSL_NODE_PORT
StateSaveLocation=$DDPSL_DIR/state
SlurmdSpoolDir=$DDPSL_DIR/spool-%n
SlurmctldPidFile=$DDPSL_DIR/slurmctld.pid
SlurmdPidFile=$DDPSL_DIR/slurmd-%n.pid
SlurmctldLogFile=$DDPSL_DIR/log/slurmctld.log
SlurmdLogFile=$DDPSL_DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=5
MinJobAge=60
MailProg=/bin/true
NodeName=ddpslurm[0-$((N - 1))] NodeAddr=$addrs CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

ddpsl_alive "$DDPSL_DIR/slurmctld.pid" || slurmctld -c -i
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
scontrol ping | grep -q UP || die "slurmctld not answering; see $DDPSL_DIR/log/slurmctld.log"
for ((i = 0; i < N; i++)); do
  node=$(ddpsl_node "$i")
  ddpsl_alive "$DDPSL_DIR/slurmd-$node.pid" && continue
  mkdir -p "$DDPSL_DIR/spool-$node"
  # Why nsenter, not `ip netns exec`: the latter remounts /sys, hiding /sys/fs/cgroup, and
  # slurmd 22.05 then refuses to start. unshare --uts gives the node its own hostname.
  SLURM_CONF=$SLURM_CONF nsenter --net=/run/netns/$node unshare --uts /bin/sh -c "hostname $node && exec slurmd -N $node"
done
for _ in $(seq 200); do
  [ "$(sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle$')" -ge "$N" ] && break
  sleep 0.1
done
[ "$(sinfo -h -N -o '%t' | grep -c '^idle$')" -ge "$N" ] || die "not all nodes idle; see $DDPSL_DIR/log/"
echo "cluster-up: $N node(s) idle; export SLURM_CONF=$SLURM_CONF"
