// softmax.cu — see softmax.h. Softmax and its backward: one block per row, reductions over a fixed
// shuffle tree (same bits every run), each thread writing only the elements it read, which is what
// makes y == x (and dx == dy) safe. Top-k: one warp per row; each lane keeps, by insertion, the best
// k of the elements lane, lane + 32, ...; then k rounds of a warp arg-best over the lanes' heads
// pick the row's k best in order. Candidates are compared by a strict total order (larger value,
// then lower index; numbers before NaNs, NaNs by index), so every lane's butterfly reaches the same
// winner and the result matches the CPU's insertion sort exactly.
#include "kernels/cuda/softmax.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/reduce.cuh"

namespace sal::kernels::cuda {
namespace {

using reduce::exp_row;
using reduce::block_sum;
using reduce::kFullMask;

constexpr int kMaxRowThreads = 256;
// Rows (warps) per block of the top-k kernel.
constexpr int kTopKWarps = 8;

int row_threads(int n) { return reduce::row_threads(n, kMaxRowThreads); }

__global__ void softmax_forward_kernel(const float* x, float* y, int N) {
  const size_t row = blockIdx.x;
  const float* xr = x + row * N;
  float* yr = y + row * N;
  const float inv = 1.0f / exp_row(xr, yr, N).sum;
  for (int i = threadIdx.x; i < N; i += blockDim.x) yr[i] *= inv;
}

__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int N) {
  const size_t row = blockIdx.x;
  const float* yr = y + row * N;
  const float* dyr = dy + row * N;
  float* dxr = dx + row * N;
  float d = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) d += yr[i] * dyr[i];
  const float dot = block_sum(d);
  for (int i = threadIdx.x; i < N; i += blockDim.x) dxr[i] = yr[i] * (dyr[i] - dot);
}

// a (value, index) ranks before b; index < 0 marks an empty candidate, after everything.
__device__ __forceinline__ bool ranks_before(float a, int ia, float b, int ib) {
  if (ib < 0) return ia >= 0;
  if (ia < 0) return false;
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan && b_nan ? ia < ib : b_nan;
  if (a != b) return a > b;
  return ia < ib;
}

__global__ void topk_kernel(const float* __restrict__ x, int M, int N, int k, int32_t* __restrict__ idx,
                            float* __restrict__ val) {
  const int lane = threadIdx.x & 31;
  const long long row = static_cast<long long>(blockIdx.x) * kTopKWarps + (threadIdx.x >> 5);
  if (row >= M) return;  // the whole warp leaves: the shuffles below see all 32 lanes
  const float* xr = x + size_t(row) * N;
  // This lane's best k of its elements, sorted (insertion, as the CPU's topk_row).
  float lv[kTopKMax];
  int li[kTopKMax];
  int cnt = 0;
  for (int i = lane; i < N; i += 32) {
    const float xi = xr[i];
    if (cnt == k && !ranks_before(xi, i, lv[k - 1], li[k - 1])) continue;
    int pos = cnt < k ? cnt++ : k - 1;
    for (; pos > 0 && ranks_before(xi, i, lv[pos - 1], li[pos - 1]); --pos) {
      lv[pos] = lv[pos - 1];
      li[pos] = li[pos - 1];
    }
    lv[pos] = xi;
    li[pos] = i;
  }
  // k rounds: the best head over the lanes wins and its lane moves to its next. The lanes keep at
  // least k candidates together (k <= N), so every round has a winner.
  int head = 0;
  for (int r = 0; r < k; ++r) {
    float bv = head < cnt ? lv[head] : 0.0f;
    int bi = head < cnt ? li[head] : -1;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, bv, o);
      const int oi = __shfl_xor_sync(kFullMask, bi, o);
      if (ranks_before(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == 0) {
      idx[size_t(row) * k + r] = bi;
      val[size_t(row) * k + r] = bv;
    }
    if (head < cnt && li[head] == bi) ++head;
  }
}

Status bad(const char* fn, const std::string& what) { return invalid_argument(std::string(fn) + ": " + what); }

}  // namespace

Status softmax_forward(const Context& ctx, const float* x, float* y, int M, int N) {
  constexpr const char* fn = "softmax_forward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (N < 0) return bad(fn, "N = " + std::to_string(N));
  if (M == 0 || N == 0) return {};
  if (!x || !y) return bad(fn, "null pointer argument");
  softmax_forward_kernel<<<unsigned(M), row_threads(N), 0, ctx.stream()>>>(x, y, N);
  return launch_status("softmax_forward_kernel");
}

Status softmax_backward(const Context& ctx, const float* y, const float* dy, float* dx, int M, int N) {
  constexpr const char* fn = "softmax_backward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (N < 0) return bad(fn, "N = " + std::to_string(N));
  if (M == 0 || N == 0) return {};
  if (!y || !dy || !dx) return bad(fn, "null pointer argument");
  softmax_backward_kernel<<<unsigned(M), row_threads(N), 0, ctx.stream()>>>(y, dy, dx, N);
  return launch_status("softmax_backward_kernel");
}

Status topk(const Context& ctx, const float* x, int M, int N, int k, int32_t* idx, float* val) {
  constexpr const char* fn = "topk";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (N < 0) return bad(fn, "N = " + std::to_string(N));
  if (k < 1 || k > N || k > kTopKMax)
    return bad(fn, "k = " + std::to_string(k) + " (needs 1 <= k <= min(N = " + std::to_string(N) +
                       ", " + std::to_string(kTopKMax) + "))");
  if (M == 0) return {};
  if (!x || !idx || !val) return bad(fn, "null pointer argument");
  const unsigned blocks = unsigned((static_cast<long long>(M) + kTopKWarps - 1) / kTopKWarps);
  topk_kernel<<<blocks, kTopKWarps * 32, 0, ctx.stream()>>>(x, M, N, k, idx, val);
  return launch_status("topk_kernel");
}

}  // namespace sal::kernels::cuda
