#!/usr/bin/env bash
# The GPU path on a GPU machine, from what scripts/gpu/pack.sh put into .gpu-carry/: unpacks the
# binaries and libraries to a temporary folder, finds CUDA, NCCL and cuBLAS in the PyTorch wheels'
# nvidia/*/lib folders, puts Fashion-MNIST where the tests read it, then runs the steps of
# scripts/gpu/gpu_check.py (gpu tests, epoch CPU vs CUDA, NCCL all_reduce, sgemm roofline,
# ddp-train vs PyTorch DDP, PyTorch 2.x workers and TCPStore client, forkserver and in-process
# recovery with CUDA workers; with two GPUs, ddp-train's NCCL abort) within 8 minutes.
# Writes gpu-check.json, gpu-check.txt and gpu-check.log into OUT_DIR.
# Usage: scripts/gpu/check.sh [OUT_DIR]   (default: $OUT, else .gpu-out)
# Exit: 0 every step that ran passed; without a GPU that is the rehearsal, and the last lines say
# "no GPU". 1 a step failed. 2 nothing usable was carried (run scripts/gpu/pack.sh).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-${OUT:-$root/.gpu-out}}"
carry="$root/.gpu-carry"
python="${PYTHON:-python3}"
mkdir -p "$out"

[[ -f $carry/bin-lib.tar.xz ]] || { echo "check.sh: no $carry/bin-lib.tar.xz (run scripts/gpu/pack.sh)" >&2; exit 2; }
work="$(mktemp -d /tmp/ddp-gpu-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
"$python" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
  "$carry/bin-lib.tar.xz" "$work" || { echo "check.sh: cannot unpack $carry/bin-lib.tar.xz" >&2; exit 2; }
echo "check.sh: carried build of commit $(cat "$work/COMMIT")"

# CUDA's libraries: the PyTorch wheels' nvidia/<part>/lib (and nvidia/cu13/lib), else the toolkit's.
cuda_dirs="$("$python" -c '
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
print(":".join(d for r in roots for sub in ("lib", "lib64")
                for d in sorted(glob.glob(os.path.join(r, "*", sub)))))
' 2>/dev/null)"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [[ -d $d ]] && cuda_dirs="${cuda_dirs:+$cuda_dirs:}$d"
done
# The carried libraries are found through the binaries' RPATH (pack.sh), not this path, so that
# PyTorch processes keep the machine's own; carried cudart comes last, for a machine without one.
export LD_LIBRARY_PATH="$cuda_dirs:$work/lib-fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "check.sh: CUDA libraries from ${cuda_dirs:-nowhere}"

# Fashion-MNIST where ddp-train and the tests read it by default (the GPU machine runs as root).
data=/usr/share/datasets/fashion-mnist
if [[ ! -f $data/train-images-idx3-ubyte.gz ]]; then
  mkdir -p "$data" 2>/dev/null && cp "$carry/fashion-mnist/"*.gz "$data/" 2>/dev/null ||
    data="$carry/fashion-mnist"
fi

export DDP_BIN_DIR="$work/bin" DDP_CARRIED_LIB="$work/lib" DDP_DATA_DIR="$data" DDP_SOURCE_DIR="$root" PYTHONUNBUFFERED=1
timeout 470 "$python" "$root/scripts/gpu/gpu_check.py" "$out"
rc=$?
((rc == 124)) && echo "check.sh: gpu_check.py ran past 470 s" >&2
exit $((rc == 0 ? 0 : 1))
