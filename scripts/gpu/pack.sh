#!/usr/bin/env bash
# Builds what scripts/gpu/check.sh runs on a GPU machine (Release, CUDA architectures of
# cmake/DdpCuda.cmake) and puts it into the ignored folder .gpu-carry/: bin-lib.tar.xz (stripped
# binaries, libddp and the non-system, non-CUDA shared libraries they need; cudart as a fallback)
# and fashion-mnist/ (gzip'ed as installed). Prints its size with the working tree's (64 MiB cap).
# Binaries carry the RPATH $ORIGIN/../lib and libraries $ORIGIN (DT_RPATH, which also covers the
# libraries they load), so that the carried libraries reach our programs alone: PyTorch workers
# ddprun starts keep the GPU machine's own (LD_LIBRARY_PATH would hand them ours too).
# Usage: scripts/gpu/pack.sh [BUILD_DIR=build]   (needs patchelf and xz)
set -euo pipefail
for tool in patchelf xz strip; do
  command -v $tool >/dev/null || { echo "pack.sh: needs $tool (scripts/setup.sh installs it)" >&2; exit 2; }
done
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
build="${1:-build}"
carry=.gpu-carry
data=/usr/share/datasets/fashion-mnist
targets=(ddprun ddp-train ddp-bench ddp-bench-allreduce ddp-bench-sgemm ddp-bench-rendezvous
         ddp-store runtime_worker)
limit=$((64 * 1024 * 1024))

if [[ ! -f $build/CMakeCache.txt ]]; then
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
              -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake --preset default -B "$build" "${launcher[@]}"
fi
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt" ||
  { echo "pack.sh: $build is not a Release build" >&2; exit 2; }
cmake --build "$build" -j"${JOBS:-2}" -- "${targets[@]}"
[[ -x $build/bin/ddp-bench-sgemm ]] ||
  { echo "pack.sh: $build was configured without CUDA/NCCL (see cmake/DdpCuda.cmake)" >&2; exit 2; }
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz \
         t10k-labels-idx1-ubyte.gz; do
  [[ -f $data/$f ]] || { echo "pack.sh: no $data/$f (apt-get install dataset-fashion-mnist)" >&2; exit 2; }
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/lib-fallback"
for t in "${targets[@]}"; do
  cp "$build/bin/$t" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$t"
  patchelf --remove-rpath "$stage/bin/$t"
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$stage/bin/$t"
done
# Every library ldd resolves, except glibc's and the compiler runtime's (the GPU machine's are
# newer) and CUDA's (the PyTorch wheels bring NCCL, cuBLAS and cudart there).
for t in "${targets[@]}"; do ldd "$build/bin/$t"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | \
        libstdc++.so* | libgcc_s.so* | libnccl.so* | libcuda.so* | libcublas*) ;;
      libcudart.so*) cp -L "$path" "$stage/lib-fallback/$name" ;;
      *)
        cp -L "$path" "$stage/lib/$name"
        strip --strip-unneeded "$stage/lib/$name"
        patchelf --remove-rpath "$stage/lib/$name"
        patchelf --force-rpath --set-rpath '$ORIGIN' "$stage/lib/$name"
        ;;
    esac
  done
# The commit, marked when the build had uncommitted changes (the device's copy of the tree has no
# reliable git metadata of its own, so this is the one record of what was built).
{
  git rev-parse HEAD | tr -d '\n'
  git diff --quiet HEAD -- || printf '+uncommitted'
  echo
} >"$stage/COMMIT"

rm -rf "$carry"
mkdir -p "$carry/fashion-mnist"
tar -C "$stage" -cf - . | xz -T2 -6 >"$carry/bin-lib.tar.xz"
cp "$data"/*-ubyte.gz "$carry/fashion-mnist/"

tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | awk 'END {print $1}')
folder=$(du -sb "$carry" | cut -f1)
echo "pack.sh: $carry: $((folder / 1024)) KiB ($(ls "$stage/bin" | wc -l) binaries," \
  "$(ls "$stage/lib" | wc -l) libraries); working tree $((tree / 1024)) KiB;" \
  "together $(((tree + folder) / 1024)) KiB of $((limit / 1024)) KiB"
if ((tree + folder > limit)); then
  echo "pack.sh: over the 64 MiB a device call carries" >&2
  exit 1
fi
