// exchange.h — how the model reaches its experts. The model routes each local token to k experts;
// an ExpertExchange computes those experts' outputs wherever the experts live and brings the
// gradients back. LocalExchange (local_exchange.h) holds every expert in this process; the
// runtime's distributed exchange dispatches tokens to the workers holding replicas (Lazarus's
// flexible dispatcher, all-to-all-v over the data plane).
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"

namespace sal::model {

// One MoE layer's routing of the local tokens: token t goes to experts idx[t*k + j], j < k.
struct Routing {
  int tokens = 0;
  int k = 0;
  std::vector<int32_t> idx;
};

class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;

  // Sums over every worker, in place: per-expert assignment counts and gate-probability sums, and
  // the token count. (The Switch load-balancing loss is over the global batch, so that it does not
  // depend on how the batch is split.)
  virtual Status global_stats(int layer, std::vector<double>& counts, std::vector<double>& prob_sums,
                              double& tokens) = 0;

  // out[(t*k + j) * d ...] = expert idx[t*k+j] applied to x[t] (x is [tokens, d]).
  virtual Status forward(int layer, const float* x, const Routing& r, float* out) = 0;

  // d_out [tokens*k, d] (already scaled by each assignment's combine weight) -> dx [tokens*k, d];
  // accumulates the experts' weight gradients where they live.
  virtual Status backward(int layer, const float* d_out, float* dx) = 0;

  // Said before backward(): how its d_out was made, d_out[t*k + j] = w[t*k + j] * dy[t]
  // (moe_layer.h's combine_backward; dy [tokens, d], w [tokens*k]), for an exchange that logs what
  // it dispatches (runtime/distributed_exchange.h). Nothing by default.
  virtual void note_combine(int layer, const float* dy, const float* w) {
    (void)layer, (void)dy, (void)w;
  }
};

}  // namespace sal::model
