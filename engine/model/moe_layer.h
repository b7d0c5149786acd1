// moe_layer.h — what both model families' MoE layers compute alike around their routers: the
// Switch balancing loss over the global batch (each worker's routing counts and score sums
// gathered through the exchange), the weighted combine of the chosen experts' outputs into the
// residual stream, and its backward. The routers themselves differ (moe_gpt.cpp, moe_llama.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "model/exchange.h"

namespace sal::model {

// The balancing statistics of one layer over the global batch.
struct Balance {
  std::vector<double> f;  // each expert's share of the assignments, f_e = counts_e / (k tokens)
  double tokens = 0;      // the global batch's tokens (of this pass)
  double loss = 0;        // sum_e f_e P_e, P_e the mean score (before the loss's weight alpha E)
};

// idx [N*k] the local assignments, scores [N*E] the probabilities the loss averages (rows summing
// to 1). Adds each expert's local count to `counts_out` [E].
Result<Balance> global_balance(ExpertExchange& ex, int layer, const std::vector<int32_t>& idx,
                               const std::vector<float>& scores, int N, int E, int K,
                               std::vector<uint32_t>& counts_out);

// next[t] += sum_j w[t,j] out[t,j] (out [N*k, D], w [N*k], next [N, D]).
void combine(const std::vector<float>& out, const std::vector<float>& w, int N, int K, int D, std::vector<float>& next);

// The combine's backward for dy [N, D]: dw [N*k] = out[t,j] . dy[t] and d_out [N*k, D] = w[t,j] dy[t].
void combine_backward(const std::vector<float>& out, const std::vector<float>& w, const float* dy, int N, int K, int D,
                      std::vector<float>& dw, std::vector<float>& d_out);

}  // namespace sal::model
