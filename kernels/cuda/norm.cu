// norm.cu — see norm.h. Forward and the input gradient run one block per row: the block reduces
// the row (a fixed shuffle tree, so the same bits every run) and then each thread writes the
// elements it read. The parameter gradients run in two kernels: per (32-column tile, row chunk) a
// 32x8 block sums its chunk's rows into scratch, then one thread per column adds the chunks in
// order into dgamma / dbeta. RMSNorm is LayerNorm without the mean and the shift: its kernels are
// the same shapes, its gain's partial sums the same tiles (the final pass reads them with no part_b).
#include "kernels/cuda/norm.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/reduce.cuh"

namespace sal::kernels::cuda {
namespace {

using reduce::block_sum;

constexpr int kMaxRowThreads = 256;
// Tile of the column pass: 32 columns (one warp reads 32 consecutive floats of a row) by 8 row lanes.
constexpr int kTileCols = 32;
constexpr int kTileRows = 8;
// Fewest rows per chunk of the column pass (two rows per row lane: below that the partials cost
// more than they save).
constexpr int kMinChunkRows = 16;

int row_threads(int n) { return reduce::row_threads(n, kMaxRowThreads); }

// How the column pass cuts M rows: `count` chunks of `rows` rows (the last one may be short).
// count <= kLayerNormMaxChunks because rows >= ceil(M / kLayerNormMaxChunks).
struct Chunks {
  int rows, count;
};
Chunks column_chunks(int M) {
  const int rows = std::max(kMinChunkRows, (M + kLayerNormMaxChunks - 1) / kLayerNormMaxChunks);
  return {rows, (M + rows - 1) / rows};
}

// One block per row. y may alias x: the last loop reads and writes the thread's own elements, after
// the reductions (whose barriers order every earlier read).
__global__ void layernorm_forward_kernel(const float* x, const float* __restrict__ gamma,
                                         const float* __restrict__ beta, float* y, float* __restrict__ mean,
                                         float* __restrict__ rstd, int N) {
  const size_t row = blockIdx.x;
  const float* xr = x + row * N;
  float* yr = y + row * N;
  const float inv_n = 1.0f / float(N);
  float s = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) s += xr[i];
  const float mu = block_sum(s) * inv_n;
  float q = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) {
    const float d = xr[i] - mu;
    q += d * d;
  }
  const float var = block_sum(q) * inv_n;
  const float rs = 1.0f / sqrtf(var + kLayerNormEps);
  for (int i = threadIdx.x; i < N; i += blockDim.x) yr[i] = (xr[i] - mu) * rs * gamma[i] + beta[i];
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma; one block per row.
__global__ void layernorm_input_grad_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                            const float* __restrict__ gamma, const float* __restrict__ mean,
                                            const float* __restrict__ rstd, float* __restrict__ dx, int N) {
  const size_t row = blockIdx.x;
  const float* dyr = dy + row * N;
  const float* xr = x + row * N;
  float* dxr = dx + row * N;
  const float mu = mean[row], rs = rstd[row];
  const float inv_n = 1.0f / float(N);
  float a = 0.0f, b = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) {
    const float g = dyr[i] * gamma[i];
    a += g;
    b += g * ((xr[i] - mu) * rs);
  }
  const float g_mean = block_sum(a) * inv_n;
  const float gx_mean = block_sum(b) * inv_n;
  for (int i = threadIdx.x; i < N; i += blockDim.x) {
    const float xhat = (xr[i] - mu) * rs;
    dxr[i] = rs * (dyr[i] * gamma[i] - g_mean - xhat * gx_mean);
  }
}

// Block (kTileCols, kTileRows) over columns [blockIdx.x * 32, +32) and row chunk blockIdx.y:
// part_g[chunk, n] = sum over the chunk's rows of dy * xhat, part_b[chunk, n] = sum of dy. Row lane
// ty takes rows r0 + ty, r0 + ty + 8, ...; the 8 lane sums are then added in lane order.
__global__ void layernorm_param_partial_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                               const float* __restrict__ mean, const float* __restrict__ rstd,
                                               int M, int N, int chunk_rows, float* __restrict__ part_g,
                                               float* __restrict__ part_b) {
  __shared__ float sg[kTileRows][kTileCols], sb[kTileRows][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int n = blockIdx.x * kTileCols + tx;
  const int chunk = blockIdx.y;
  const int r0 = chunk * chunk_rows;
  const int r1 = min(M, r0 + chunk_rows);
  float ag = 0.0f, ab = 0.0f;
  if (n < N) {
    for (int m = r0 + ty; m < r1; m += kTileRows) {
      const size_t e = size_t(m) * N + n;
      const float d = dy[e];
      ag += d * ((x[e] - mean[m]) * rstd[m]);
      ab += d;
    }
  }
  sg[ty][tx] = ag;
  sb[ty][tx] = ab;
  __syncthreads();
  if (ty == 0 && n < N) {
    float g = sg[0][tx], b = sb[0][tx];
    for (int j = 1; j < kTileRows; ++j) {
      g += sg[j][tx];
      b += sb[j][tx];
    }
    part_g[size_t(chunk) * N + n] = g;
    part_b[size_t(chunk) * N + n] = b;
  }
}

// One thread per column: adds the chunks' partial sums in chunk order, then accumulates. part_b
// is null for RMSNorm (no shift: dbeta null too).
__global__ void layernorm_param_final_kernel(const float* __restrict__ part_g, const float* __restrict__ part_b,
                                             int chunks, int N, float* __restrict__ dgamma,
                                             float* __restrict__ dbeta) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float g = 0.0f, b = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    g += part_g[size_t(c) * N + n];
    if (part_b) b += part_b[size_t(c) * N + n];
  }
  if (dgamma) dgamma[n] += g;
  if (dbeta) dbeta[n] += b;
}

// RMSNorm, one block per row (y may alias x, as layernorm_forward_kernel's).
__global__ void rmsnorm_forward_kernel(const float* x, const float* __restrict__ gamma, float* y,
                                       float* __restrict__ rstd, int N, float eps) {
  const size_t row = blockIdx.x;
  const float* xr = x + row * N;
  float* yr = y + row * N;
  float q = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) q += xr[i] * xr[i];
  const float rs = 1.0f / sqrtf(block_sum(q) / float(N) + eps);
  for (int i = threadIdx.x; i < N; i += blockDim.x) yr[i] = xr[i] * rs * gamma[i];
  if (threadIdx.x == 0) rstd[row] = rs;
}

// dx = rstd * (g - xhat * mean(g * xhat)), g = dy * gamma, xhat = x * rstd; one block per row.
__global__ void rmsnorm_input_grad_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                          const float* __restrict__ gamma, const float* __restrict__ rstd,
                                          float* __restrict__ dx, int N) {
  const size_t row = blockIdx.x;
  const float* dyr = dy + row * N;
  const float* xr = x + row * N;
  float* dxr = dx + row * N;
  const float rs = rstd[row];
  float b = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) b += dyr[i] * gamma[i] * (xr[i] * rs);
  const float gx_mean = block_sum(b) / float(N);
  for (int i = threadIdx.x; i < N; i += blockDim.x) dxr[i] = rs * (dyr[i] * gamma[i] - xr[i] * rs * gx_mean);
}

// The gain's partial sums, tiled as layernorm_param_partial_kernel: part_g[chunk, n] = sum over the
// chunk's rows of dy * xhat.
__global__ void rmsnorm_param_partial_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                             const float* __restrict__ rstd, int M, int N, int chunk_rows,
                                             float* __restrict__ part_g) {
  __shared__ float sg[kTileRows][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int n = blockIdx.x * kTileCols + tx;
  const int chunk = blockIdx.y;
  const int r0 = chunk * chunk_rows;
  const int r1 = min(M, r0 + chunk_rows);
  float ag = 0.0f;
  if (n < N)
    for (int m = r0 + ty; m < r1; m += kTileRows) {
      const size_t e = size_t(m) * N + n;
      ag += dy[e] * (x[e] * rstd[m]);
    }
  sg[ty][tx] = ag;
  __syncthreads();
  if (ty == 0 && n < N) {
    float g = sg[0][tx];
    for (int j = 1; j < kTileRows; ++j) g += sg[j][tx];
    part_g[size_t(chunk) * N + n] = g;
  }
}

Status bad(const char* fn, const std::string& what) { return invalid_argument(std::string(fn) + ": " + what); }

}  // namespace

size_t layernorm_backward_scratch_floats(int M, int N) {
  if (M <= 0 || N <= 0) return 0;
  return size_t(2) * size_t(column_chunks(M).count) * size_t(N);
}

Status layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int M, int N) {
  constexpr const char* fn = "layernorm_forward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (N < 0) return bad(fn, "N = " + std::to_string(N));
  if (M == 0 || N == 0) return {};
  if (!x || !gamma || !beta || !y || !mean || !rstd) return bad(fn, "null pointer argument");
  layernorm_forward_kernel<<<unsigned(M), row_threads(N), 0, ctx.stream()>>>(x, gamma, beta, y, mean, rstd, N);
  return launch_status("layernorm_forward_kernel");
}

Status layernorm_backward(const Context& ctx, const float* dy, const float* x, const float* gamma,
                          const float* mean, const float* rstd, float* dx, float* dgamma, float* dbeta, int M,
                          int N, float* scratch) {
  constexpr const char* fn = "layernorm_backward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (N < 0) return bad(fn, "N = " + std::to_string(N));
  if (M == 0 || N == 0) return {};
  if (!dy || !x || !gamma || !mean || !rstd || !dx) return bad(fn, "null pointer argument");
  if (dx == dy || dx == x) return bad(fn, "dx aliases dy or x");
  const bool params = dgamma || dbeta;
  if (params && !scratch) return bad(fn, "null scratch with dgamma or dbeta given");
  layernorm_input_grad_kernel<<<unsigned(M), row_threads(N), 0, ctx.stream()>>>(dy, x, gamma, mean, rstd, dx, N);
  SAL_CUDA_TRY(launch_status("layernorm_input_grad_kernel"));
  if (!params) return {};
  const Chunks ch = column_chunks(M);
  float* part_g = scratch;
  float* part_b = scratch + size_t(ch.count) * N;
  const dim3 grid(unsigned((N + kTileCols - 1) / kTileCols), unsigned(ch.count));
  layernorm_param_partial_kernel<<<grid, dim3(kTileCols, kTileRows), 0, ctx.stream()>>>(dy, x, mean, rstd, M, N,
                                                                                      ch.rows, part_g, part_b);
  SAL_CUDA_TRY(launch_status("layernorm_param_partial_kernel"));
  constexpr int kThreads = 256;
  layernorm_param_final_kernel<<<unsigned((N + kThreads - 1) / kThreads), kThreads, 0, ctx.stream()>>>(
      part_g, part_b, ch.count, N, dgamma, dbeta);
  return launch_status("layernorm_param_final_kernel");
}

size_t rmsnorm_backward_scratch_floats(int M, int N) {
  if (M <= 0 || N <= 0) return 0;
  return size_t(column_chunks(M).count) * size_t(N);
}

Status rmsnorm_forward(const Context& ctx, const float* x, const float* gamma, float* y, float* rstd, int M, int N,
                       float eps) {
  constexpr const char* fn = "rmsnorm_forward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (N < 0) return bad(fn, "N = " + std::to_string(N));
  if (M == 0 || N == 0) return {};
  if (!x || !gamma || !y || !rstd) return bad(fn, "null pointer argument");
  rmsnorm_forward_kernel<<<unsigned(M), row_threads(N), 0, ctx.stream()>>>(x, gamma, y, rstd, N, eps);
  return launch_status("rmsnorm_forward_kernel");
}

Status rmsnorm_backward(const Context& ctx, const float* dy, const float* x, const float* gamma, const float* rstd,
                        float* dx, float* dgamma, int M, int N, float* scratch) {
  constexpr const char* fn = "rmsnorm_backward";
  if (M < 0) return bad(fn, "M = " + std::to_string(M));
  if (N < 0) return bad(fn, "N = " + std::to_string(N));
  if (M == 0 || N == 0) return {};
  if (!dy || !x || !gamma || !rstd || !dx) return bad(fn, "null pointer argument");
  if (dx == dy || dx == x) return bad(fn, "dx aliases dy or x");
  if (dgamma && !scratch) return bad(fn, "null scratch with dgamma given");
  rmsnorm_input_grad_kernel<<<unsigned(M), row_threads(N), 0, ctx.stream()>>>(dy, x, gamma, rstd, dx, N);
  SAL_CUDA_TRY(launch_status("rmsnorm_input_grad_kernel"));
  if (!dgamma) return {};
  const Chunks ch = column_chunks(M);
  const dim3 grid(unsigned((N + kTileCols - 1) / kTileCols), unsigned(ch.count));
  rmsnorm_param_partial_kernel<<<grid, dim3(kTileCols, kTileRows), 0, ctx.stream()>>>(dy, x, rstd, M, N, ch.rows,
                                                                                    scratch);
  SAL_CUDA_TRY(launch_status("rmsnorm_param_partial_kernel"));
  constexpr int kThreads = 256;
  layernorm_param_final_kernel<<<unsigned((N + kThreads - 1) / kThreads), kThreads, 0, ctx.stream()>>>(
      scratch, nullptr, ch.count, N, dgamma, nullptr);
  return launch_status("layernorm_param_final_kernel (rmsnorm)");
}

}  // namespace sal::kernels::cuda
