// activation.h — GELU on the GPU: the same function as kernels/cpu/activation.h (GPT-2's tanh
// approximation, computed as x * sigmoid(2u) with u = sqrt(2/pi) (x + 0.044715 x^3)), on device
// pointers. Elementwise; the results agree with the CPU's to a few float ulps (expf against the
// CPU's polynomial exp).
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// y = gelu(x), x and y [n] (y may alias x).
Status gelu_forward(const Context& ctx, const float* x, float* y, size_t n);

// dx = dy * gelu'(x)  (overwrites; dx may alias dy).
Status gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, size_t n);

}  // namespace sal::kernels::cuda
