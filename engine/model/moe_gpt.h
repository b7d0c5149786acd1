// moe_gpt.h — the moe-gpt model: token + learned position embeddings; L pre-LayerNorm blocks of
// causal multi-head self-attention and an MoE feed-forward (softmax gate over E experts, top-k,
// each expert a d -> 4d -> d GELU MLP with biases, dropless, Switch load-balancing loss); a final
// LayerNorm; the LM head tied to the token embedding; cross-entropy.
//
// step() runs forward and backward on the local batch and accumulates gradients into the units;
// experts are reached through an ExpertExchange. Losses are normalised by the *global* token count
// (and the balancing loss uses global statistics), so the sum of the workers' gradients is the
// gradient of the global batch whatever the split. The combine weight of an expert is its gate
// probability (not renormalised over the k chosen), so the gate learns from the main loss too.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "model/data.h"
#include "model/exchange.h"
#include "model/params.h"

namespace sal::model {

struct StepStats {
  double ce_sum = 0;          // sum of the local tokens' cross-entropy (divide by the global count)
  double aux = 0;             // the balancing loss (summed over layers; already global)
  int64_t tokens = 0;         // local tokens
  // Local token-to-expert assignments per layer and expert (the loads the controller balances).
  std::vector<std::vector<uint32_t>> expert_counts;
  // The expert work this worker did in the step, forward and backward: the rows its experts
  // computed and the CPU time it took (the host's data plane measures them; 0 where not measured).
  int64_t expert_rows = 0;
  double expert_cpu_ms = 0;
};

// Adds `b`'s losses, tokens and expert counts to `a` (a rank computing several shard types).
void add_stats(StepStats& a, const StepStats& b);

// Experiments only (Dims::skew): the k experts of each of the N = rows tokens of layer `layer`,
// drawn without replacement with weight `skew` for the first hot_experts experts and 1 for the
// others, from a hash of (layer, position, token, previous token) — the same whichever worker or
// device computes the token. ids [N] are the layer's input token ids, T the sequence length;
// idx [N*k] is overwritten. The CPU and GPU models both route with it.
void forced_experts(const Dims& d, int layer, const int32_t* ids, int N, int T, int32_t* idx);

class MoeGpt {
 public:
  explicit MoeGpt(Params& p) : p_(p) {}

  // Forward and backward; gradients accumulate. global_tokens: tokens of the whole global batch.
  Result<StepStats> step(const Batch& b, int64_t global_tokens, ExpertExchange& ex);
  // The share of the global batch whose routing statistics the exchange's global_stats() gathers
  // (1: the whole batch). A data-parallel group computes a shard type at a time and balances over
  // that type's tokens alone; its balancing loss and gradient are weighted by the type's share, so
  // the types' losses add up to the batch's.
  void set_aux_share(double share) { aux_share_ = share; }

  // Forward only, the loss of a batch (validation): its tokens' cross-entropy summed (ce_sum) and
  // counted (tokens), computed as step() computes it; no gradient, the weights untouched.
  // global_tokens: the tokens of every rank's part together.
  Result<StepStats> evaluate(const Batch& b, int64_t global_tokens, ExpertExchange& ex);
  // Forward only, one sequence of up to seq_len tokens: the logits [V] of the last position.
  Result<std::vector<float>> next_logits(const std::vector<int32_t>& ids, ExpertExchange& ex);
  // Forward only, B sequences of T <= seq_len tokens (ids [B*T], row-major): the logits [B*T, V] of
  // every position.
  Result<std::vector<float>> logits(const std::vector<int32_t>& ids, int B, int T, ExpertExchange& ex);

 private:
  struct LayerActs {
    std::vector<float> x, h1, mean1, rstd1, qkv, att_probs, att, xmid, h2, mean2, rstd2;
    std::vector<float> gate_probs, w, out;
    std::vector<int32_t> idx;
    std::vector<double> f;  // global assignment fraction per expert (for the balancing loss)
    double global_tokens = 0;
  };

  Status forward(const std::vector<int32_t>& inputs, int B, int T, int64_t global_tokens, ExpertExchange& ex,
                 StepStats& stats);
  Status forward_layer(int l, int B, int T, ExpertExchange& ex, StepStats& stats);
  Status backward(const std::vector<int32_t>& inputs, int B, int T, ExpertExchange& ex);
  Status backward_layer(int l, int B, int T, ExpertExchange& ex, std::vector<float>& dres);
  void backward_gate(int l, int N, const std::vector<float>& dw, std::vector<float>& dh2);
  void force_routing(int l, int T, LayerActs& a);

  Params& p_;
  std::vector<LayerActs> acts_;
  std::vector<float> x_final_, xf_, meanf_, rstdf_, logits_, probs_;  // final stream, after LN, logits, probs
  std::vector<int32_t> targets_;
  const std::vector<int32_t>* inputs_ = nullptr;  // the batch forward() runs on
  const Batch* batch_ = nullptr;                  // step()'s batch while it runs (replayed routing places its tokens)
  int64_t global_tokens_ = 0;
  double aux_share_ = 1.0;
};

}  // namespace sal::model
