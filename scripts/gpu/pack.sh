#!/usr/bin/env bash
# pack.sh — run HERE, not on the GPU machine: builds build-gpu/ for Hopper (sm_90, Release) with this
# machine's compilers and libraries, and packs what the GPU steps run — the salamander binary and
# its GPU plugin, the gpu-labelled test programs, the benchmarks, and CTest's files that list their
# cases — stripped, into .gpu/build-gpu, and that tree compressed into .gpu/build-gpu.tar.xz (both
# ignored by git; carry ".gpu/debs" and ".gpu/build-gpu.tar.xz": the tree itself and the .debs
# together are more than a device call carries). A cold build of the CUDA path takes minutes of the
# lent machine's time; built here it costs none, and bench.sh's `build` step then only unpacks the
# tree and the .debs (scripts/gpu/collect-debs.sh) for the libraries the programs load.
#
# The programs name this checkout's absolute paths (the test data, the salamander binary); bench.sh
# links that path to its own checkout on the GPU machine (.gpu/build-gpu/ORIGIN says which path).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TARGETS=(salamander salamander_gpu test_cuda_smoke test_cuda_ops test_cuda_gemm test_cuda_moe test_cuda_llama test_nccl
         test_model_cuda test_model_llama_cuda test_gpu_exchange test_gpu_run test_gpu_shared test_gpu_nccl
         bench_moe_gpu bench_nccl bench_skew bench_recovery bench_train bench_sparse bench_copy_overlap)
if [ ! -f build-gpu/build.ninja ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/tmp/pack-cmake.log 2>&1 || { tail -40 /tmp/pack-cmake.log; exit 1; }
fi
echo "pack.sh: building ${#TARGETS[@]} targets in build-gpu/ (a cold build takes about 20 minutes on 2 cores)"
cmake --build build-gpu --target "${TARGETS[@]}" >/tmp/pack-build.log 2>&1 || { grep -E -A5 "error|FAILED" /tmp/pack-build.log | head -60; exit 1; }

PACK=.gpu/build-gpu
rm -rf "$PACK"
mkdir -p "$PACK"
echo "$ROOT" >"$PACK/ORIGIN"
for t in "${TARGETS[@]}"; do
  for f in build-gpu/$t build-gpu/lib$t.so; do
    [ -f "$f" ] && strip -o "$PACK/${f#build-gpu/}" "$f"
  done
done
# CTest's tree: every CTestTestfile.cmake and the case lists doctest_discover_tests wrote.
(cd build-gpu && find . \( -name CTestTestfile.cmake -o -name '*_tests*.cmake' -o -name '*_include*.cmake' \) \
   -not -path '*/CMakeFiles/*' -print0 | xargs -0 -I{} cp --parents {} "$ROOT/$PACK/")
# What the device call carries (64 MiB at most, the .debs' 21 MB included): the tree, compressed.
tar -C .gpu -cf - build-gpu | xz -T0 -6 >.gpu/build-gpu.tar.xz
echo "pack.sh: $(du -sh "$PACK" | cut -f1) in $PACK, $(du -sh .gpu/build-gpu.tar.xz | cut -f1) in" \
  ".gpu/build-gpu.tar.xz ($(git rev-parse --short HEAD)); carry \".gpu/debs\" and \".gpu/build-gpu.tar.xz\""
