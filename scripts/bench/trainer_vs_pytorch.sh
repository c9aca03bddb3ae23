#!/usr/bin/env bash
# ddp-train under ddprun against PyTorch 1.13 DDP under torchrun, side by side in one run: the same
# MLP (784-1024-1024-10), Fashion-MNIST, batch 64 per rank, SGD(lr 0.05, momentum 0.9), 2 CPU
# ranks with OMP_NUM_THREADS=1 each. Prints samples/s and final test accuracy of both, and the
# ratio. Usage: scripts/bench/trainer_vs_pytorch.sh [BUILD_DIR=build] [EPOCHS=1]
# DEVICE=cuda compares on one GPU instead (NPROC=1, nccl); its PyTorch side needs a PyTorch built
# with CUDA (PYTHON=/path/to/python), which Debian's is not: then only ddp-train's figure prints.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
epochs="${2:-1}"
device="${DEVICE:-cpu}"
python="${PYTHON:-/usr/bin/python3}"
if [[ $device == cuda ]]; then nproc="${NPROC:-1}"; else nproc="${NPROC:-2}"; fi
export OMP_NUM_THREADS=1

field() { grep '^summary ' | tail -1 | tr ' ' '\n' | sed -n "s/^$1=//p"; }

torch_out=""
if [[ $device == cpu ]] || "$python" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  echo "== PyTorch DDP ($device, torchrun, $nproc ranks, epochs=$epochs)"
  # Debian's torchrun breaks on its default --redirects/--tee under Python 3.11; a rank map avoids
  # it. Run as a module of $python so that another PyTorch can be compared.
  torch_out="$(PET_REDIRECTS=9:1 PET_TEE=9:1 "$python" -m torch.distributed.run --standalone \
    --nproc_per_node="$nproc" --monitor_interval=0.1 "$here/torch_mlp_ddp.py" --epochs "$epochs" \
    --device "$device" 2>&1 | tee /dev/stderr)"
else
  echo "== PyTorch baseline skipped: $python's torch has no CUDA (set PYTHON to one that has)"
fi

echo "== ddp-train under ddprun ($device, $nproc ranks, epochs=$epochs)"
ours_out="$("$build/bin/ddprun" --nproc_per_node="$nproc" --no_python "$build/bin/ddp-train" \
  --epochs "$epochs" --device "$device" --log_every 200 2>&1 | tee /dev/stderr)"

ours_sps="$(field samples_per_s <<<"$ours_out")"
ours_acc="$(field test_accuracy <<<"$ours_out")"
echo
printf '%-28s %14s %14s\n' "($device, $nproc ranks)" "samples/s" "test accuracy"
if [[ -n $torch_out ]]; then
  torch_sps="$(field samples_per_s <<<"$torch_out")"
  torch_acc="$(field test_accuracy <<<"$torch_out")"
  printf '%-28s %14s %14s\n' "PyTorch DDP + torchrun" "$torch_sps" "$torch_acc"
fi
printf '%-28s %14s %14s\n' "ddp-train + ddprun" "$ours_sps" "$ours_acc"
if [[ -n $torch_out ]]; then
  echo "ratio (ddp-train / PyTorch samples/s): $(echo "scale=2; $ours_sps / $torch_sps" | bc)"
fi
