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

}  // namespace

void gelu_forward(const float* x, float* y, size_t n) {
  detail::parallel_for(n, kGeluGrain, [&](size_t b, size_t e) { gelu_forward_range(x + b, y + b, e - b); });
}

void gelu_backward(const float* x, const float* dy, float* dx, size_t n) {
  detail::parallel_for(n, kGeluGrain,
                       [&](size_t b, size_t e) { gelu_backward_range(x + b, dy + b, dx + b, e - b); });
}

}  // namespace sal::kernels::cpu
