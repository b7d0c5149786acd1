// reduce.cuh — the reductions the row kernels share (included by .cu files only): warp and block
// sums and maxima over fixed shuffle trees, so a result has the same bits every run, and the block
// size for a kernel that reduces one row per block. A block calling block_sum / block_max must have
// blockDim.x a multiple of 32 (row_threads gives one), and every thread must call.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

namespace sal::kernels::cuda::reduce {

constexpr unsigned kFullMask = 0xffffffffu;

// Threads of a block that reduces a row of n elements: a multiple of 32, no more than the row has
// elements (rounded up), between 32 and max_threads.
inline int row_threads(int n, int max_threads) {
  const long long t = (static_cast<long long>(n) + 31) / 32 * 32;
  return int(std::min<long long>(max_threads, std::max<long long>(32, t)));
}

// Fixed xor tree: the same value in every lane, the same order every run.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// fmaxf ignores NaN: the max is over the numbers (a NaN reaches a softmax row through its exp).
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Block-wide sum: every thread gets the result.
template <class T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T warp_part[32];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T s = lane < int(blockDim.x >> 5) ? warp_part[lane] : T(0);
    s = warp_sum(s);
    if (lane == 0) result = s;
  }
  __syncthreads();
  const T r = result;
  __syncthreads();  // all have read `result` before a next call may overwrite it
  return r;
}

// Block-wide max over the numbers: every thread gets the result.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_part[32];
  __shared__ float result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < int(blockDim.x >> 5) ? warp_part[lane] : -INFINITY;
    s = warp_max(s);
    if (lane == 0) result = s;
  }
  __syncthreads();
  const float r = result;
  __syncthreads();
  return r;
}

}  // namespace sal::kernels::cuda::reduce
