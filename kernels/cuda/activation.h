// activation.h — GELU and SwiGLU on the GPU: the same functions as kernels/cpu/activation.h (GELU
// GPT-2's tanh approximation, computed as x * sigmoid(2u) with u = sqrt(2/pi) (x + 0.044715 x^3);
// SwiGLU silu(gate) * up, moe-llama's), on device pointers. Elementwise; the results agree with the
// CPU's to a few float ulps (expf against the CPU's polynomial exp).
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// y = gelu(x), x and y [n] (y may alias x).
Status gelu_forward(const Context& ctx, const float* x, float* y, size_t n);

// dx = dy * gelu'(x)  (overwrites; dx may alias dy).
Status gelu_backward(const Context& ctx, const float* x, const float* dy, float* dx, size_t n);

// h [rows, 2F] holds each row's gate columns then its up columns; a [rows, F] = silu(gate) * up
// (a must not overlap h).
Status swiglu_forward(const Context& ctx, const float* h, float* a, int rows, int F);

// da [rows, F] -> dh [rows, 2F] (overwritten: the gate's and the up's gradients; dh must not
// overlap h or da).
Status swiglu_backward(const Context& ctx, const float* h, const float* da, float* dh, int rows, int F);

}  // namespace sal::kernels::cuda
