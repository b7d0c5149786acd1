// rmsnorm.cpp — see rmsnorm.h. With xhat = x * rstd and g = dy * gamma, row by row:
//   dx = rstd * (g - xhat * mean(g * xhat)),   dgamma += sum_m dy * xhat
// the input gradient split over rows, the gain's over column blocks (each column's sum runs over the
// rows in order on one thread, so the bits do not depend on the thread count).
#include "kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

SAL_KERNEL_CLONES
void rms_forward_rows(const float* x, const float* gamma, float* y, float* rstd, size_t m0, size_t m1, int N,
                      float eps) {
  const float inv_n = 1.0f / float(N);
  for (size_t m = m0; m < m1; ++m) {
    const float* xr = x + m * N;
    float* yr = y + m * N;
    const float rs = 1.0f / std::sqrt(vm::lane_sum(N, [&](int i) { return xr[i] * xr[i]; }) * inv_n + eps);
    for (int i = 0; i < N; ++i) yr[i] = xr[i] * rs * gamma[i];
    rstd[m] = rs;
  }
}

SAL_KERNEL_CLONES
void rms_input_grad_rows(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx, size_t m0,
                         size_t m1, int N) {
  const float inv_n = 1.0f / float(N);
  for (size_t m = m0; m < m1; ++m) {
    const float* dyr = dy + m * N;
    const float* xr = x + m * N;
    float* dxr = dx + m * N;
    const float rs = rstd[m];
    const float gx_mean = vm::lane_sum(N, [&](int i) { return dyr[i] * gamma[i] * (xr[i] * rs); }) * inv_n;
    for (int i = 0; i < N; ++i) dxr[i] = rs * (dyr[i] * gamma[i] - xr[i] * rs * gx_mean);
  }
}

SAL_KERNEL_CLONES
void rms_gain_grad_columns(const float* dy, const float* x, const float* rstd, float* dgamma, int M, int N, int n0,
                           int n1) {
  float acc[kColumnBlock] = {};
  const int w = n1 - n0;
  for (int m = 0; m < M; ++m) {
    const float* dyr = dy + size_t(m) * N + n0;
    const float* xr = x + size_t(m) * N + n0;
    const float rs = rstd[m];
    for (int j = 0; j < w; ++j) acc[j] += dyr[j] * (xr[j] * rs);
  }
  for (int j = 0; j < w; ++j) dgamma[n0 + j] += acc[j];
}

}  // namespace

void rmsnorm_forward(const float* x, const float* gamma, float* y, float* rstd, int M, int N, float eps) {
  if (N <= 0) return;
  detail::parallel_for(size_t(std::max(0, M)), detail::row_grain(N),
                       [&](size_t m0, size_t m1) { rms_forward_rows(x, gamma, y, rstd, m0, m1, N, eps); });
}

void rmsnorm_backward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx, float* dgamma,
                      int M, int N) {
  if (N <= 0 || M <= 0) return;
  detail::parallel_for(size_t(M), detail::row_grain(N),
                       [&](size_t m0, size_t m1) { rms_input_grad_rows(dy, x, gamma, rstd, dx, m0, m1, N); });
  if (!dgamma) return;
  const size_t blocks = (size_t(N) + kColumnBlock - 1) / kColumnBlock;
  detail::parallel_for(blocks, 1, [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b)
      rms_gain_grad_columns(dy, x, rstd, dgamma, M, N, int(b * kColumnBlock),
                            std::min(N, int((b + 1) * kColumnBlock)));
  });
}

}  // namespace sal::kernels::cpu
