// activation.cu — see activation.h. With s = sigmoid(2u), u = c (x + a x^3):
//   gelu(x)  = x s
//   gelu'(x) = s + 2 x s (1 - s) c (1 + 3 a x^2)
// exactly as kernels/cpu/activation.cpp; SwiGLU with s = sigmoid(g):
//   a = g s u,  da/dg = s (1 + g (1 - s)) u,  da/du = g s. The exponent is clamped to [-87, 88] as the CPU's vm::exp
// clamps it, so far tails give the same (tiny, finite) values; NaN passes through. Grid-stride
// loops; no __restrict__ because the outputs may alias an input (each element is read, then
// written, by the same thread).
#include "kernels/cuda/activation.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

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

// One thread per (row, i): the row's gate g = h[r, i] and up u = h[r, F + i].
__global__ void swiglu_forward_kernel(const float* __restrict__ h, float* __restrict__ a, size_t n, int F) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += stride) {
    const size_t r = e / size_t(F), i = e % size_t(F);
    const float g = h[r * 2 * F + i], u = h[r * 2 * F + F + i];
    a[e] = g * sigmoid(g) * u;
  }
}

__global__ void swiglu_backward_kernel(const float* __restrict__ h, const float* __restrict__ da,
                                       float* __restrict__ dh, size_t n, int F) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += stride) {
    const size_t r = e / size_t(F), i = e % size_t(F);
    const float g = h[r * 2 * F + i], u = h[r * 2 * F + F + i];
    const float s = sigmoid(g);
    dh[r * 2 * F + i] = da[e] * u * s * (1.0f + g * (1.0f - s));
    dh[r * 2 * F + F + i] = da[e] * g * s;
  }
}

Status swiglu_args(const char* fn, const void* h, const void* in, const void* out, int rows, int F) {
  if (rows < 0 || F < 0)
    return invalid_argument(std::string(fn) + ": rows " + std::to_string(rows) + ", F " + std::to_string(F));
  if (rows > 0 && F > 0 && (!h || !in || !out)) return invalid_argument(std::string(fn) + ": null pointer argument");
  return {};
}

}  // namespace

Status swiglu_forward(const Context& ctx, const float* h, float* a, int rows, int F) {
  SAL_CUDA_TRY(swiglu_args("swiglu_forward", h, h, a, rows, F));
  const size_t n = size_t(rows) * size_t(F);
  if (n == 0) return {};
  swiglu_forward_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(h, a, n, F);
  return launch_status("swiglu_forward_kernel");
}

Status swiglu_backward(const Context& ctx, const float* h, const float* da, float* dh, int rows, int F) {
  SAL_CUDA_TRY(swiglu_args("swiglu_backward", h, da, dh, rows, F));
  const size_t n = size_t(rows) * size_t(F);
  if (n == 0) return {};
  swiglu_backward_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(h, da, dh, n, F);
  return launch_status("swiglu_backward_kernel");
}

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
