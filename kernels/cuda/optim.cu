// optim.cu — see optim.h. AdamW, scale and clip_scale are grid-stride elementwise loops. The sum
// of squares runs in two kernels: G = sum_squares_blocks(n) blocks each reduce a fixed strided
// share of x (double accumulators, a fixed shuffle tree) into scratch[block]; one block then adds
// the G partials in a fixed order and writes or adds the total. G depends only on n, so the result
// is the same bits every run.
#include "kernels/cuda/optim.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/adamw_step.h"
#include "kernels/cuda/reduce.cuh"

namespace sal::kernels::cuda {
namespace {

using reduce::block_sum;
constexpr int kThreads = 256;
// Elements each thread of the partial-sum kernel takes, at least, before another block is used.
constexpr size_t kSumPerThread = 16;

unsigned grid_for(const Context& ctx, size_t n) {
  const size_t want = (n + kThreads - 1) / kThreads;
  const size_t cap = size_t(std::max(1, ctx.sm_count())) * 32;
  return unsigned(std::min(want, cap));
}

// Blocks of the partial-sum kernel for n elements (n >= 1): a function of n only.
size_t sum_squares_blocks(size_t n) {
  const size_t per_block = size_t(kThreads) * kSumPerThread;
  return std::min(kSumSquaresMaxBlocks, (n + per_block - 1) / per_block);
}

__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, size_t n, AdamStep s) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
    adamw_element(p[i], g[i], m[i], v[i], s);
}

__global__ void sum_squares_partial_kernel(const float* __restrict__ x, size_t n, double* __restrict__ partial) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  double acc = 0.0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const double xi = x[i];
    acc += xi * xi;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: thread j adds partials j, j + kThreads, ... in order; the block tree adds the threads.
__global__ void sum_squares_final_kernel(const double* __restrict__ partial, int blocks, double* out,
                                         bool accumulate) {
  double acc = 0.0;
  for (int j = threadIdx.x; j < blocks; j += blockDim.x) acc += partial[j];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *out = accumulate ? *out + acc : acc;
}

__global__ void scale_kernel(float* x, size_t n, float s) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) x[i] *= s;
}

// The factor is formed per thread from the device double (one cached load): the same value
// everywhere, and no extra kernel or host round trip.
__global__ void clip_scale_kernel(float* x, size_t n, const double* __restrict__ sum_squares, double max_norm) {
  const double norm = sqrt(*sum_squares);
  if (max_norm <= 0.0 || norm <= max_norm || !isfinite(norm)) return;  // the CPU's factor 1: untouched
  const float s = float(max_norm / norm);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) x[i] *= s;
}

Status bad(const char* fn, const std::string& what) { return invalid_argument(std::string(fn) + ": " + what); }

Status sum_squares_impl(const char* fn, const Context& ctx, const float* x, size_t n, double* out, double* scratch,
                        bool accumulate) {
  if (!out) return bad(fn, "null out");
  if (n == 0) {
    if (accumulate) return {};
    return cuda_status(int(cudaMemsetAsync(out, 0, sizeof(double), ctx.stream())), "cudaMemsetAsync (sum_squares)");
  }
  if (!x || !scratch) return bad(fn, "null x or scratch");
  const size_t blocks = sum_squares_blocks(n);
  sum_squares_partial_kernel<<<unsigned(blocks), kThreads, 0, ctx.stream()>>>(x, n, scratch);
  SAL_CUDA_TRY(launch_status("sum_squares_partial_kernel"));
  sum_squares_final_kernel<<<1, kThreads, 0, ctx.stream()>>>(scratch, int(blocks), out, accumulate);
  return launch_status("sum_squares_final_kernel");
}

}  // namespace

Status adamw(const Context& ctx, float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, int64_t t) {
  constexpr const char* fn = "adamw";
  if (t < 1) return bad(fn, "t = " + std::to_string(t) + " (the step counts from 1)");
  if (n == 0) return {};
  if (!p || !g || !m || !v) return bad(fn, "null pointer argument");
  const AdamStep s = make_adam_step(lr, beta1, beta2, eps, weight_decay, t);
  adamw_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(p, g, m, v, n, s);
  return launch_status("adamw_kernel");
}

size_t sum_squares_scratch_doubles(size_t n) { return n == 0 ? 0 : sum_squares_blocks(n); }

Status sum_squares(const Context& ctx, const float* x, size_t n, double* out, double* scratch) {
  return sum_squares_impl("sum_squares", ctx, x, n, out, scratch, false);
}

Status add_sum_squares(const Context& ctx, const float* x, size_t n, double* out, double* scratch) {
  return sum_squares_impl("add_sum_squares", ctx, x, n, out, scratch, true);
}

Status scale(const Context& ctx, float* x, size_t n, float s) {
  if (n == 0) return {};
  if (!x) return bad("scale", "null x");
  scale_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(x, n, s);
  return launch_status("scale_kernel");
}

Status clip_scale(const Context& ctx, float* x, size_t n, const double* sum_squares, double max_norm) {
  if (n == 0) return {};
  if (!x || !sum_squares) return bad("clip_scale", "null x or sum_squares");
  clip_scale_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(x, n, sum_squares, max_norm);
  return launch_status("clip_scale_kernel");
}

}  // namespace sal::kernels::cuda
