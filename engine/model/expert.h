// expert.h — one expert's MLP on a block of token rows, and its backward: moe-gpt's
// out = GELU(x W1 + b1) W2 + b2, moe-llama's out = (silu(x Wg) * (x Wu)) W2 (SwiGLU; Wg and Wu side
// by side in W1). Shared by the local exchange (tests, a single worker) and the distributed one (the
// runtime), so an expert computes the same way wherever it lives; moe-llama's shared experts (in
// the dense unit) use the same SwiGLU MLP.
#pragma once

#include <vector>

#include "model/params.h"

namespace sal::model {

// What the backward of one expert block needs: its input rows and pre-activations.
struct ExpertBlock {
  int rows = 0;
  std::vector<float> x;  // [rows, d]
  std::vector<float> h;  // [rows, F] before GELU (moe-gpt), [rows, 2F] before SwiGLU (moe-llama)
};

// The SwiGLU MLP: out [n, D] = swiglu(x w13) w2, with w13 [D, 2F], w2 [F, D]; h [n, 2F] keeps the
// pre-activations for the backward.
void swiglu_mlp_forward(const float* x, const float* w13, const float* w2, int n, int D, int F, std::vector<float>& h,
                        float* out);
// d_out [n, D] -> dx [n, D] (overwritten); dw13 and dw2 accumulate and may be null (frozen).
void swiglu_mlp_backward(const float* x, const float* w13, const float* w2, const std::vector<float>& h,
                         const float* d_out, float* dw13, float* dw2, float* dx, int n, int D, int F);

// out [rows, d] (overwritten); fills block.h (block.x must hold the inputs).
void expert_forward(const Dims& d, const Unit& u, ExpertBlock& block, float* out);

// d_out [rows, d] -> dx [rows, d] (overwritten); accumulates the unit's weight gradient.
void expert_backward(const Dims& d, Unit& u, const ExpertBlock& block, const float* d_out, float* dx);

}  // namespace sal::model
