// model.h — what the runtime, the tools and the tests call on a model, whichever family it is
// (model.kind): a training step (forward and backward, gradients accumulated into the units), a
// forward-only loss (validation) and the logits of given tokens (sampling, export checks).
// make_model() builds the family the parameters' Dims name: MoeGpt (moe_gpt.h) or MoeLlama
// (moe_llama.h). Both reach their experts through an ExpertExchange and normalise their losses by
// the *global* token count, so the sum of the workers' gradients is the global batch's gradient
// whatever the split.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/result.h"
#include "model/data.h"
#include "model/exchange.h"
#include "model/params.h"
#include "model/router_bias.h"

namespace sal::model {

struct StepStats {
  double ce_sum = 0;          // sum of the local tokens' cross-entropy (divide by the global count)
  double aux = 0;             // the balancing loss (summed over layers; already global)
  // moe-llama's router z-loss over the local tokens, weighted (divide by the global count). It
  // shapes the gradient; the loss a job reports is cross-entropy and balancing.
  double z_sum = 0;
  int64_t tokens = 0;         // local tokens
  // Local token-to-expert assignments per layer and expert (the loads the controller balances).
  std::vector<std::vector<uint32_t>> expert_counts;
  // moe-llama with a routing bias: each expert's share of the assignments over the global batch,
  // weighted by this pass's share of it (router_bias.h; empty without a bias).
  RouterLoad router_load;
  // The expert work this worker did in the step, forward and backward: the rows its experts
  // computed and the CPU time it took (the host's data plane measures them; 0 where not measured).
  int64_t expert_rows = 0;
  double expert_cpu_ms = 0;
};

// Adds `b`'s losses, tokens and expert counts to `a` (a rank computing several shard types).
void add_stats(StepStats& a, const StepStats& b);

class Model {
 public:
  virtual ~Model() = default;

  // Forward and backward; gradients accumulate. global_tokens: tokens of the whole global batch.
  virtual Result<StepStats> step(const Batch& b, int64_t global_tokens, ExpertExchange& ex) = 0;
  // The share of the global batch whose routing statistics the exchange's global_stats() gathers
  // (1: the whole batch). A data-parallel group computes a shard type at a time and balances over
  // that type's tokens alone; its balancing loss and gradient are weighted by the type's share, so
  // the types' losses add up to the batch's.
  virtual void set_aux_share(double share) = 0;
  // Forward only, the loss of a batch (validation): its tokens' cross-entropy summed (ce_sum) and
  // counted (tokens), computed as step() computes it; no gradient, the weights untouched.
  // global_tokens: the tokens of every rank's part together.
  virtual Result<StepStats> evaluate(const Batch& b, int64_t global_tokens, ExpertExchange& ex) = 0;
  // Forward only, B sequences of T <= seq_len tokens (ids [B*T], row-major): the logits [B*T, V] of
  // every position.
  virtual Result<std::vector<float>> logits(const std::vector<int32_t>& ids, int B, int T, ExpertExchange& ex) = 0;

  // Forward only, one sequence of up to seq_len tokens: the logits [V] of the last position.
  Result<std::vector<float>> next_logits(const std::vector<int32_t>& ids, ExpertExchange& ex);
};

// The model of the family p.dims names, computing on p (which must outlive it).
std::unique_ptr<Model> make_model(Params& p);

// The checks every family's logits() makes on its input: B sequences of T tokens, each id in the
// vocabulary, T within the context.
Status check_tokens(const Dims& d, const std::vector<int32_t>& ids, int B, int T);

}  // namespace sal::model
