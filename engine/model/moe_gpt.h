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
#include "model/model.h"
#include "model/params.h"

namespace sal::model {

// Experiments only (Dims::skew): the k experts of each of the N = rows tokens of layer `layer`,
// drawn without replacement with weight `skew` for the first hot_experts experts and 1 for the
// others, from a hash of (layer, position, token, previous token) — the same whichever worker or
// device computes the token. ids [N] are the layer's input token ids, T the sequence length;
// idx [N*k] is overwritten. The CPU and GPU models both route with it.
void forced_experts(const Dims& d, int layer, const int32_t* ids, int N, int T, int32_t* idx);

class MoeGpt : public Model {
 public:
  explicit MoeGpt(Params& p) : p_(p) {}

  Result<StepStats> step(const Batch& b, int64_t global_tokens, ExpertExchange& ex) override;
  void set_aux_share(double share) override { aux_share_ = share; }
  Result<StepStats> evaluate(const Batch& b, int64_t global_tokens, ExpertExchange& ex) override;
  Result<std::vector<float>> logits(const std::vector<int32_t>& ids, int B, int T, ExpertExchange& ex) override;

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
