// norm.cpp — see norm.h. Forward: per row, the mean, then the variance around it (two passes over a
// row that sits in L1: no cancellation), then the affine output. Backward, with xhat = (x-mean)*rstd
// and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))          row by row, split over rows;
//   dgamma += sum_m dy * xhat,  dbeta += sum_m dy              split over column blocks, so each
// column's sum runs over the rows in order on one thread, whatever the thread count.
#include "kernels/cpu/norm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

SAL_KERNEL_CLONES
void forward_rows(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                  size_t m0, size_t m1, int N) {
  const float inv_n = 1.0f / float(N);
  for (size_t m = m0; m < m1; ++m) {
    const float* xr = x + m * N;
    float* yr = y + m * N;
    const float mu = vm::lane_sum(N, [&](int i) { return xr[i]; }) * inv_n;
    const float var = vm::lane_sum(N, [&](int i) { return (xr[i] - mu) * (xr[i] - mu); }) * inv_n;
    const float rs = 1.0f / std::sqrt(var + kLayerNormEps);
    for (int i = 0; i < N; ++i) yr[i] = (xr[i] - mu) * rs * gamma[i] + beta[i];
    mean[m] = mu;
    rstd[m] = rs;
  }
}

SAL_KERNEL_CLONES
void input_grad_rows(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                     float* dx, size_t m0, size_t m1, int N) {
  const float inv_n = 1.0f / float(N);
  for (size_t m = m0; m < m1; ++m) {
    const float* dyr = dy + m * N;
    const float* xr = x + m * N;
    float* dxr = dx + m * N;
    const float mu = mean[m], rs = rstd[m];
    const float g_mean = vm::lane_sum(N, [&](int i) { return dyr[i] * gamma[i]; }) * inv_n;
    const float gx_mean =
        vm::lane_sum(N, [&](int i) { return dyr[i] * gamma[i] * ((xr[i] - mu) * rs); }) * inv_n;
    for (int i = 0; i < N; ++i) {
      const float xhat = (xr[i] - mu) * rs;
      dxr[i] = rs * (dyr[i] * gamma[i] - g_mean - xhat * gx_mean);
    }
  }
}

// dgamma[n0:n1] += sum_m dy * xhat, dbeta[n0:n1] += sum_m dy: sums formed over all rows, then added.
SAL_KERNEL_CLONES
void param_grad_columns(const float* dy, const float* x, const float* mean, const float* rstd, float* dgamma,
                        float* dbeta, int M, int N, int n0, int n1) {
  float acc_g[kColumnBlock] = {}, acc_b[kColumnBlock] = {};
  const int w = n1 - n0;
  for (int m = 0; m < M; ++m) {
    const float* dyr = dy + size_t(m) * N + n0;
    const float* xr = x + size_t(m) * N + n0;
    const float mu = mean[m], rs = rstd[m];
    for (int j = 0; j < w; ++j) {
      acc_g[j] += dyr[j] * ((xr[j] - mu) * rs);
      acc_b[j] += dyr[j];
    }
  }
  for (int j = 0; j < w; ++j) {
    if (dgamma) dgamma[n0 + j] += acc_g[j];
    if (dbeta) dbeta[n0 + j] += acc_b[j];
  }
}

}  // namespace

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, int M, int N) {
  if (N <= 0) return;
  detail::parallel_for(size_t(std::max(0, M)), detail::row_grain(N), [&](size_t m0, size_t m1) {
    forward_rows(x, gamma, beta, y, mean, rstd, m0, m1, N);
  });
}

void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, float* dx, float* dgamma, float* dbeta, int M, int N) {
  if (M <= 0 || N <= 0) return;
  detail::parallel_for(size_t(M), detail::row_grain(N), [&](size_t m0, size_t m1) {
    input_grad_rows(dy, x, gamma, mean, rstd, dx, m0, m1, N);
  });
  if (!dgamma && !dbeta) return;
  const size_t blocks = size_t(N + kColumnBlock - 1) / kColumnBlock;
  detail::parallel_for(blocks, 1, [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b) {
      const int n0 = int(b) * kColumnBlock;
      param_grad_columns(dy, x, mean, rstd, dgamma, dbeta, M, N, n0, std::min(N, n0 + kColumnBlock));
    }
  });
}

}  // namespace sal::kernels::cpu
