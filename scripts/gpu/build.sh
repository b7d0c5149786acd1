#!/usr/bin/env bash
# build.sh — run ON THE GPU MACHINE from the repository root (device `run` with carry [".gpu"]):
# unpacks the carried .debs (scripts/gpu/collect-debs.sh) into /tmp/deps, never onto /, points the
# build at them and builds build-gpu/ for Hopper (sm_90) with every core. Incremental: a warm
# machine keeps build-gpu/ between calls. Source it (`. scripts/gpu/build.sh`) so LD_LIBRARY_PATH
# stays set for what runs next.
set -euo pipefail
. scripts/gpu/deps.sh
if [ ! -f build-gpu/build.ninja ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH=$DEPS/usr -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu \
    -DOpenBLAS_DIR=$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread/cmake/openblas \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/tmp/cmake.log 2>&1 || { tail -40 /tmp/cmake.log; exit 1; }
fi
if ! cmake --build build-gpu -j"$(nproc)" >/tmp/build.log 2>&1; then
  grep -E -A5 "error|FAILED" /tmp/build.log | head -80
  exit 1
fi
echo "build-gpu: built ($(grep -c '^\[' /tmp/build.log) steps)"
