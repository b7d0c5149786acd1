// heads.cu — see heads.h. One thread per output element, a grid-stride loop: expand copies the
// element its head reads; collapse copies a query column or sums a key/value column's repeats.
#include "kernels/cuda/heads.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Output column c of 3D: [0, D) the queries; then keys, then values, query head h's block of hd
// reading key/value head h / group.
__global__ void expand_kernel(const float* __restrict__ qkv, float* __restrict__ full, size_t n, int D, int KV,
                              int hd) {
  const int in = D + 2 * KV, group = D / KV;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += stride) {
    const size_t row = e / size_t(3 * D);
    const int c = int(e % size_t(3 * D));
    const float* src = qkv + row * in;
    if (c < D) {
      full[e] = src[c];
      continue;
    }
    const int part = c < 2 * D ? 0 : 1;  // keys, values
    const int col = c - D * (1 + part);
    const int h = col / hd, i = col % hd;
    full[e] = src[D + part * KV + (h / group) * hd + i];
  }
}

// Output column c of D + 2KV: a query column copied, or a key/value column the sum of its group's
// query heads' gradients, in head order from +0.
__global__ void collapse_kernel(const float* __restrict__ dfull, float* __restrict__ dqkv, size_t n, int D, int KV,
                                int hd) {
  const int in = D + 2 * KV, group = D / KV;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += stride) {
    const size_t row = e / size_t(in);
    const int c = int(e % size_t(in));
    const float* src = dfull + row * size_t(3 * D);
    if (c < D) {
      dqkv[e] = src[c];
      continue;
    }
    const int part = c < D + KV ? 0 : 1;
    const int col = c - D - part * KV;
    const int kvh = col / hd, i = col % hd;
    float s = 0.0f;
    for (int h = kvh * group; h < (kvh + 1) * group; ++h) s += src[D * (1 + part) + h * hd + i];
    dqkv[e] = s;
  }
}

Status check(const char* fn, const void* in, const void* out, int N, int D, int KV, int hd) {
  if (N < 0 || D <= 0 || KV <= 0 || hd <= 0 || KV % hd != 0 || D % KV != 0 || D % hd != 0)
    return invalid_argument(std::string(fn) + ": N " + std::to_string(N) + ", D " + std::to_string(D) + ", KV " +
                            std::to_string(KV) + ", hd " + std::to_string(hd) +
                            " (KV a multiple of hd that divides D)");
  if (N > 0 && (!in || !out)) return invalid_argument(std::string(fn) + ": null pointer argument");
  return {};
}

}  // namespace

Status expand_kv_heads(const Context& ctx, const float* qkv, float* full, int N, int D, int KV, int hd) {
  SAL_CUDA_TRY(check("expand_kv_heads", qkv, full, N, D, KV, hd));
  const size_t n = size_t(N) * 3 * size_t(D);
  if (n == 0) return {};
  expand_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(qkv, full, n, D, KV, hd);
  return launch_status("expand_kv_heads kernel");
}

Status collapse_kv_heads(const Context& ctx, const float* dfull, float* dqkv, int N, int D, int KV, int hd) {
  SAL_CUDA_TRY(check("collapse_kv_heads", dfull, dqkv, N, D, KV, hd));
  const size_t n = size_t(N) * size_t(D + 2 * KV);
  if (n == 0) return {};
  collapse_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(dfull, dqkv, n, D, KV, hd);
  return launch_status("collapse_kv_heads kernel");
}

}  // namespace sal::kernels::cuda
