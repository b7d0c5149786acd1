// blas1.cu — see blas1.h. A grid-stride loop: one launch covers any n.
#include "kernels/cuda/blas1.h"

#include <cuda_runtime.h>

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void axpy_kernel(size_t n, float a, const float* __restrict__ x, float* __restrict__ y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] += a * x[i];
}

}  // namespace

Status axpy(const Context& ctx, size_t n, float a, const float* x, float* y) {
  if (n == 0) return {};
  if (!x || !y) return invalid_argument("axpy: null pointer");
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535) blocks = 65535;
  axpy_kernel<<<unsigned(blocks), kThreads, 0, ctx.stream()>>>(n, a, x, y);
  return launch_status("axpy_kernel");
}

}  // namespace sal::kernels::cuda
