// convert.cu — see convert.h. Grid-stride loops, one element per thread per step; the rounding is
// the intrinsic __float2bfloat16_rn (round to nearest even, denormals kept).
#include "kernels/cuda/convert.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill the device, no more (the loop
// covers the rest).

__global__ void to_bf16_kernel(const float* __restrict__ x, Bf16* __restrict__ y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void to_float_kernel(const Bf16* __restrict__ x, float* __restrict__ y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) y[i] = __bfloat162float(x[i]);
}

}  // namespace

Status to_bf16(const Context& ctx, const float* x, Bf16* y, size_t n) {
  if (n == 0) return {};
  if (!x || !y) return invalid_argument(std::string("to_bf16: null ") + (x ? "y" : "x"));
  to_bf16_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(x, y, n);
  return launch_status("to_bf16_kernel");
}

Status to_float(const Context& ctx, const Bf16* x, float* y, size_t n) {
  if (n == 0) return {};
  if (!x || !y) return invalid_argument(std::string("to_float: null ") + (x ? "y" : "x"));
  to_float_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(x, y, n);
  return launch_status("to_float_kernel");
}

}  // namespace sal::kernels::cuda
