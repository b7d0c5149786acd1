// activation.h — GELU, tanh approximation (GPT-2's, moe-gpt's experts), and SwiGLU (moe-llama's):
//   swiglu(g, u) = silu(g) * u,  silu(g) = g * sigmoid(g)
// GELU:
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// computed as x * sigmoid(2u), u the tanh argument, which is the same function without the
// cancellation of 1 + tanh near -1.
#pragma once

#include <cstddef>

namespace sal::kernels::cpu {

void gelu_forward(const float* x, float* y, size_t n);

// dx = dy * gelu'(x)  (overwrites; dx may alias dy)
void gelu_backward(const float* x, const float* dy, float* dx, size_t n);

// h [rows, 2F] holds each row's gate columns then its up columns; a [rows, F] = silu(gate) * up.
void swiglu_forward(const float* h, float* a, int rows, int F);

// da [rows, F] -> dh [rows, 2F] (overwritten; the gate's and the up's gradients).
void swiglu_backward(const float* h, const float* da, float* dh, int rows, int F);

}  // namespace sal::kernels::cpu
