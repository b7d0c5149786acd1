// activation.h — GELU, tanh approximation (GPT-2's):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// computed as x * sigmoid(2u), u the tanh argument, which is the same function without the
// cancellation of 1 + tanh near -1.
#pragma once

#include <cstddef>

namespace sal::kernels::cpu {

void gelu_forward(const float* x, float* y, size_t n);

// dx = dy * gelu'(x)  (overwrites; dx may alias dy)
void gelu_backward(const float* x, const float* dy, float* dx, size_t n);

}  // namespace sal::kernels::cpu
