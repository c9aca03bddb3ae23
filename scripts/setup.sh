#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of ddprun from Debian's packages.
# Idempotent: packages already present are skipped, and `apt-get update` runs at most once.
set -euo pipefail

packages=(
  # toolchain and build
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # libraries (Boost 1.81 gives Asio 1.26; it replaces Debian's default libboost-dev 1.74)
  libcli11-dev libboost1.81-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2
  libgloo-dev zlib1g-dev libopenblas-dev
  # data for the reference trainer
  dataset-fashion-mnist
  # compatibility tests against real PyTorch 1.13 (its Recommends pull in Qt; skip them)
  python3-torch python3-numpy
  # multi-node tests in network namespaces, and SLURM
  iproute2 iptables nftables procps psmisc util-linux jq curl
  slurmctld slurmd slurm-client munge
  # agents of one SLURM job authenticate to its stores with munge credentials (libmunge)
  libmunge-dev
  # --hostfile tests: a real sshd per namespace node (started by the test with its own config)
  openssh-server openssh-client
  # the etcd rendezvous tests (a 3-member etcd 3.4 cluster on loopback); OpenSSL for its https
  # client (libssl-dev) and the tests' throwaway certificates (openssl)
  etcd-server etcd-client libssl-dev openssl
  # benchmark scripts (perf: rendezvous.sh per_agent; strace: forkserver.sh counts opened files)
  bc linux-perf strace
  # mpirun detection tests (tests/integration/parity): OpenMPI's mpirun
  openmpi-bin
  # native worker stacks (SIGQUIT, --hang_timeout reports): eu-stack
  elfutils
  # scripts/gpu/pack.sh: the carried binaries find the carried libraries through their RPATH
  patchelf xz-utils
  # scripts/package.sh: the wheel (python3-wheel; a venv and pip for its test), the .deb
  # (dpkg-deb, and dpkg-shlibdeps from dpkg-dev for its Depends)
  python3-venv python3-pip python3-wheel dpkg-dev
  # metrics tests: a real Prometheus server and promtool (docs/metrics.md)
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} packages present"
fi
