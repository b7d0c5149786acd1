// rope.cu — see rope.h. One thread per (row, head, pair): it reads the pair, rotates it and writes it
// back, so no two threads touch the same element. A grid-stride loop over rows * heads * hd/2.
#include "kernels/cuda/rope.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// sign +1 rotates forward, -1 backward.
__global__ void rope_kernel(float* x, size_t pairs, int T, int ld, int col0, int heads, int hd, float theta,
                            float sign) {
  const int half = hd / 2;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < pairs; p += stride) {
    const int i = int(p % size_t(half));
    const size_t rh = p / size_t(half);
    const int h = int(rh % size_t(heads));
    const size_t r = rh / size_t(heads);
    const int t = int(r % size_t(T));
    const double freq = pow(double(theta), -2.0 * i / double(hd));
    const float c = float(cos(t * freq)), sn = sign * float(sin(t * freq));
    float* v = x + r * size_t(ld) + size_t(col0) + size_t(h) * hd;
    const float x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c - x2 * sn;
    v[i + half] = x2 * c + x1 * sn;
  }
}

Status rotate(const Context& ctx, const char* fn, float* x, int rows, int T, int ld, int col0, int heads, int hd,
              float theta, float sign) {
  if (rows < 0 || T <= 0 || heads < 0 || hd < 0 || col0 < 0 || ld < 0)
    return invalid_argument(std::string(fn) + ": rows " + std::to_string(rows) + ", T " + std::to_string(T) +
                            ", heads " + std::to_string(heads) + ", hd " + std::to_string(hd) + ", col0 " +
                            std::to_string(col0) + ", ld " + std::to_string(ld));
  if (size_t(col0) + size_t(heads) * size_t(hd) > size_t(ld))
    return invalid_argument(std::string(fn) + ": columns " + std::to_string(col0) + " + " + std::to_string(heads) +
                            " x " + std::to_string(hd) + " exceed the row of " + std::to_string(ld));
  const size_t pairs = size_t(rows) * size_t(heads) * size_t(hd / 2);
  if (pairs == 0) return {};
  if (!x) return invalid_argument(std::string(fn) + ": null x");
  rope_kernel<<<grid_for(ctx, pairs), kThreads, 0, ctx.stream()>>>(x, pairs, T, ld, col0, heads, hd, theta, sign);
  return launch_status("rope_kernel");
}

}  // namespace

Status rope_forward(const Context& ctx, float* x, int rows, int T, int ld, int col0, int heads, int hd, float theta) {
  return rotate(ctx, "rope_forward", x, rows, T, ld, col0, heads, hd, theta, 1.0f);
}

Status rope_backward(const Context& ctx, float* dx, int rows, int T, int ld, int col0, int heads, int hd,
                     float theta) {
  return rotate(ctx, "rope_backward", dx, rows, T, ld, col0, heads, hd, theta, -1.0f);
}

}  // namespace sal::kernels::cuda
