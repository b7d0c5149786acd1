// activation.cu — see activation.h. With s = sigmoid(2u), u = c (x + a x^3):
//   gelu(x)  = x s
//   gelu'(x) = s + 2 x s (1 - s) c (1 + 3 a x^2)
// exactly as kernels/cpu/activation.cpp. The exponent is clamped to [-87, 88] as the CPU's vm::exp
// clamps it, so far tails give the same (tiny, finite) values; NaN passes through. Grid-stride
// loops; no __restrict__ because the outputs may alias an input (each element is read, then
// written, by the same thread).
#include "kernels/cuda/activation.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

unsigned grid_for(const Context& ctx, size_t n) {
  const size_t want = (n + kThreads - 1) / kThreads;
  const size_t cap = size_t(std::max(1, ctx.sm_count())) * 32;
  return unsigned(std::min(want, cap));
}

// 1 / (1 + e^-z) with the CPU's exponent clamp (comparisons, not fminf, so NaN stays NaN).
__device__ __forceinline__ float sigmoid(float z) {
  float e = -z;
  e = e > 88.0f ? 88.0f : e;
  e = e < -87.0f ? -87.0f : e;
  return 1.0f / (1.0f + expf(e));
}

__global__ void gelu_forward_kernel(const float* x, float* y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float xi = x[i];
    const float u = kGeluC * (xi + kGeluA * xi * xi * xi);
    y[i] = xi * sigmoid(2.0f * u);
  }
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float xi = x[i];
    const float u = kGeluC * (xi + kGeluA * xi * xi * xi);
    const float s = sigmoid(2.0f * u);
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * xi * xi);
    dx[i] = dy[i] * (s + 2.0f * xi * s * (1.0f - s) * du);
  }
}

}  // namespace

Status gelu_forward(const Context& ctx, const float* x, float* y, size_t n) {
  if (n == 0) return {};
  if (!x || !y) return invalid_argument(std::string("gelu_forward: null ") + (x ? "y" : "x"));
  gelu_forward_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(x, y, n);
  return launch_status("gelu_forward_kernel");
}

Status gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, size_t n) {
  if (n == 0) return {};
  if (!x || !dy || !dx) return invalid_argument(std::string("gelu_backward: null ") + (!x ? "x" : !dy ? "dy" : "dx"));
  gelu_backward_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(x, dy, dx, n);
  return launch_status("gelu_backward_kernel");
}

}  // namespace sal::kernels::cuda
