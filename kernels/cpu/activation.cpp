// activation.cpp — see activation.h. With s = sigmoid(2u), u = c (x + a x^3):
//   gelu(x)  = x s
//   gelu'(x) = s + 2 x s (1 - s) c (1 + 3 a x^2)
// (from 1 + tanh u = 2s and 1 - tanh^2 u = 4 s (1 - s)). One pass, elementwise, vectorised.
#include "kernels/cpu/activation.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
// Elements per pool range: ~32K floats (128 KiB) per hand-off.
constexpr size_t kGeluGrain = 32768;

SAL_KERNEL_CLONES
void gelu_forward_range(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float u = kGeluC * (xi + kGeluA * xi * xi * xi);
    y[i] = xi * vm::sigmoid(2.0f * u);
  }
}

SAL_KERNEL_CLONES
void gelu_backward_range(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float u = kGeluC * (xi + kGeluA * xi * xi * xi);
    const float s = vm::sigmoid(2.0f * u);
    const float du = kGeluC * (1.0f + 3.0f * kGeluA * xi * xi);
    dx[i] = dy[i] * (s + 2.0f * xi * s * (1.0f - s) * du);
  }
}

SAL_KERNEL_CLONES
void swiglu_forward_rows(const float* h, float* a, size_t r0, size_t r1, int F) {
  for (size_t r = r0; r < r1; ++r) {
    const float* g = h + r * 2 * size_t(F);
    const float* u = g + F;
    float* ar = a + r * size_t(F);
    for (int i = 0; i < F; ++i) ar[i] = g[i] * vm::sigmoid(g[i]) * u[i];
  }
}

// d silu(g) / dg = s (1 + g (1 - s)), s = sigmoid(g)
SAL_KERNEL_CLONES
void swiglu_backward_rows(const float* h, const float* da, float* dh, size_t r0, size_t r1, int F) {
  for (size_t r = r0; r < r1; ++r) {
    const float* g = h + r * 2 * size_t(F);
    const float* u = g + F;
    const float* dar = da + r * size_t(F);
    float* dg = dh + r * 2 * size_t(F);
    float* du = dg + F;
    for (int i = 0; i < F; ++i) {
      const float s = vm::sigmoid(g[i]);
      dg[i] = dar[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
      du[i] = dar[i] * g[i] * s;
    }
  }
}

}  // namespace

void swiglu_forward(const float* h, float* a, int rows, int F) {
  detail::parallel_for(size_t(rows > 0 ? rows : 0), detail::row_grain(2 * F),
                       [&](size_t r0, size_t r1) { swiglu_forward_rows(h, a, r0, r1, F); });
}

void swiglu_backward(const float* h, const float* da, float* dh, int rows, int F) {
  detail::parallel_for(size_t(rows > 0 ? rows : 0), detail::row_grain(2 * F),
                       [&](size_t r0, size_t r1) { swiglu_backward_rows(h, da, dh, r0, r1, F); });
}

void gelu_forward(const float* x, float* y, size_t n) {
  detail::parallel_for(n, kGeluGrain, [&](size_t b, size_t e) { gelu_forward_range(x + b, y + b, e - b); });
}

void gelu_backward(const float* x, const float* dy, float* dx, size_t n) {
  detail::parallel_for(n, kGeluGrain,
                       [&](size_t b, size_t e) { gelu_backward_range(x + b, dy + b, dx + b, e - b); });
}

}  // namespace sal::kernels::cpu
