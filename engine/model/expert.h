// expert.h — one expert's MLP on a block of token rows: out = GELU(x W1 + b1) W2 + b2, and its
// backward. Shared by the local exchange (tests, a single worker) and the distributed one (the
// runtime), so an expert computes the same way wherever it lives.
#pragma once

#include <vector>

#include "model/params.h"

namespace sal::model {

// What the backward of one expert block needs: its input rows and pre-activations.
struct ExpertBlock {
  int rows = 0;
  std::vector<float> x;  // [rows, d]
  std::vector<float> h;  // [rows, 4d] before GELU
};

// out [rows, d] (overwritten); fills block.h (block.x must hold the inputs).
void expert_forward(const Dims& d, const Unit& u, ExpertBlock& block, float* out);

// d_out [rows, d] -> dx [rows, d] (overwritten); accumulates the unit's weight gradient.
void expert_backward(const Dims& d, Unit& u, const ExpertBlock& block, const float* d_out, float* dx);

}  // namespace sal::model
