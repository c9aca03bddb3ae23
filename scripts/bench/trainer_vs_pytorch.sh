#!/usr/bin/env bash
# ddp-train under ddprun against PyTorch 1.13 DDP under torchrun, side by side in one run: the same
# MLP (784-1024-1024-10), Fashion-MNIST, batch 64 per rank, SGD(lr 0.05, momentum 0.9), 2 CPU
# ranks with OMP_NUM_THREADS=1 each. Prints samples/s and final test accuracy of both, and the
# ratio. Usage: scripts/bench/trainer_vs_pytorch.sh [BUILD_DIR=build] [EPOCHS=1]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
epochs="${2:-1}"
export OMP_NUM_THREADS=1

field() { grep '^summary ' | tail -1 | tr ' ' '\n' | sed -n "s/^$1=//p"; }

echo "== PyTorch 1.13 DDP (gloo, CPU, torchrun, 2 ranks, epochs=$epochs)"
# Debian's torchrun breaks on its default --redirects/--tee under Python 3.11; a rank map avoids it.
torch_out="$(PET_REDIRECTS=9:1 PET_TEE=9:1 /usr/bin/torchrun --standalone --nproc_per_node=2 \
  --monitor_interval=0.1 "$here/torch_mlp_ddp.py" --epochs "$epochs" 2>&1 | tee /dev/stderr)"

echo "== ddp-train under ddprun (2 ranks, epochs=$epochs)"
ours_out="$("$build/bin/ddprun" --nproc_per_node=2 --no_python "$build/bin/ddp-train" --epochs "$epochs" \
  --log_every 200 2>&1 | tee /dev/stderr)"

torch_sps="$(field samples_per_s <<<"$torch_out")"
torch_acc="$(field test_accuracy <<<"$torch_out")"
ours_sps="$(field samples_per_s <<<"$ours_out")"
ours_acc="$(field test_accuracy <<<"$ours_out")"
echo
printf '%-28s %14s %14s\n' "" "samples/s" "test accuracy"
printf '%-28s %14s %14s\n' "PyTorch 1.13 DDP + torchrun" "$torch_sps" "$torch_acc"
printf '%-28s %14s %14s\n' "ddp-train + ddprun" "$ours_sps" "$ours_acc"
echo "ratio (ddp-train / PyTorch samples/s): $(echo "scale=2; $ours_sps / $torch_sps" | bc)"
