// reduce.cuh — the reductions the row kernels share (included by .cu files only): warp and block
// sums and maxima over fixed shuffle trees, so a result has the same bits every run, and the block
// size for a kernel that reduces one row per block, and the exponentials of a row softmax. A block
// calling block_sum / block_max / exp_row must have blockDim.x a multiple of 32 (row_threads gives
// one), and every thread must call.
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

struct Sum {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
// fmaxf ignores NaN: the max is over the numbers (a NaN reaches a softmax row through its exp).
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Fixed xor tree: the same value in every lane, the same order every run.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Block-wide: every thread gets the result. Each warp reduces its lanes, then warp 0 the warps'
// results (identity for the lanes past the last warp).
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T identity, Op op) {
  __shared__ T warp_part[32];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T s = lane < int(blockDim.x >> 5) ? warp_part[lane] : identity;
    s = warp_reduce(s, op);
    if (lane == 0) result = s;
  }
  __syncthreads();
  const T r = result;
  __syncthreads();  // all have read `result` before a next call may overwrite it
  return r;
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  return warp_reduce(v, Sum{});
}
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, Max{}); }
template <class T>
__device__ __forceinline__ T block_sum(T v) {
  return block_reduce(v, T(0), Sum{});
}
__device__ __forceinline__ float block_max(float v) { return block_reduce(v, -INFINITY, Max{}); }

// The first half of a row softmax, by the whole block: p[i] = exp(x[i] - max) for i < n, and the
// row's max and the sum of the p (every thread gets both). p may be x.
struct ExpRow {
  float max, sum;
};
__device__ __forceinline__ ExpRow exp_row(const float* x, float* p, int n) {
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, x[i]);
  mx = block_max(mx);
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = expf(x[i] - mx);
    p[i] = e;
    s += e;
  }
  return {mx, block_sum(s)};
}

}  // namespace sal::kernels::cuda::reduce
