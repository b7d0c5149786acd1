// moe_llama.h — the moe-llama model, the block of today's MoE language models (Mixtral, OLMoE,
// Qwen-MoE, DeepSeek-MoE): a token embedding (no position table); L pre-RMSNorm blocks of causal
// self-attention with rotary positions and grouped-query attention (model.kv_heads key/value heads
// shared by groups of query heads) and an MoE feed-forward — a router over E SwiGLU experts (no
// biases), softmax or sigmoid scores (model.router), top-k with the chosen scores optionally
// renormalised (model.norm_topk), dropless, plus optional shared experts that every token goes
// through (model.shared_experts, in the dense unit; model.shared_gate scales their output by a
// learned sigmoid per token, Qwen2-MoE's); optionally biases on the query, key and value
// projections (model.attn_bias, Qwen2's) and RMSNorm on the queries and keys before the rotary
// positions (model.qk_norm, OLMoE's); the Switch balancing loss, DeepSeek-V3's
// routing bias (model.bias_update: added to the scores to choose the k, router_bias.h) and the
// router z-loss; a final RMSNorm; the LM head tied to the token embedding or a matrix of its own.
//
// Units and their layouts are core/model_shape.h's (the same kinds as moe-gpt: the engine plans,
// moves, snapshots, freezes and exports them the same way). A frozen unit runs forward and passes
// the input gradient back, without a weight gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace sal::model {

class MoeLlama : public Model {
 public:
  explicit MoeLlama(Params& p) : p_(p) {}

  Result<StepStats> step(const Batch& b, int64_t global_tokens, ExpertExchange& ex) override;
  void set_aux_share(double share) override { aux_share_ = share; }
  Result<StepStats> evaluate(const Batch& b, int64_t global_tokens, ExpertExchange& ex) override;
  Result<std::vector<float>> logits(const std::vector<int32_t>& ids, int B, int T, ExpertExchange& ex) override;

 private:
  struct LayerActs {
    std::vector<float> x, h1, rstd1, qkv, full, att_probs, att, xmid, h2, rstd2, shared_h;
    std::vector<float> q_raw, k_raw, q_rstd, k_rstd;  // QK-norm: the queries and keys before it, its rstd
    std::vector<float> shared_out, shared_g;          // the shared experts' output [N,D] and gate [N] (gated)
    std::vector<float> z, scores, chosen, w, out;  // router logits and scores [N,E]; chosen and combine weights [N,k]
    std::vector<int32_t> idx;
    std::vector<double> f;  // global assignment fraction per expert (the balancing loss)
    std::vector<float> lse;  // per token: logsumexp of the router logits (the z-loss)
    double global_tokens = 0;
  };

  Status forward(const std::vector<int32_t>& inputs, int B, int T, ExpertExchange& ex, StepStats& stats);
  Status attention_forward(LayerActs& a, int B, int T);
  void qk_norm_forward(const Unit& u, LayerActs& a, int N);
  void qk_norm_backward(Unit& u, const LayerActs& a, int N, std::vector<float>& dqkv);
  void shared_forward(const Unit& u, LayerActs& a, int N, std::vector<float>& next);
  void shared_backward(Unit& u, const LayerActs& a, int N, const std::vector<float>& dres, std::vector<float>& dh2);
  Status route(int l, LayerActs& a, ExpertExchange& ex, StepStats& stats);
  Status forward_layer(int l, int B, int T, ExpertExchange& ex, StepStats& stats);
  Status backward(const std::vector<int32_t>& inputs, int B, int T, ExpertExchange& ex);
  Status backward_layer(int l, int B, int T, ExpertExchange& ex, std::vector<float>& dres);
  void backward_router(int l, const std::vector<float>& dw, std::vector<float>& dh2);
  void backward_attention(int l, int B, int T, const std::vector<float>& dxmid, std::vector<float>& dh1);
  Result<StepStats> loss(const Batch& b, int64_t global_tokens, ExpertExchange& ex);

  Params& p_;
  std::vector<LayerActs> acts_;
  std::vector<float> x_final_, xf_, rstdf_, logits_, probs_;  // final stream, after the norm, logits, probs
  std::vector<int32_t> targets_;
  int64_t global_tokens_ = 0;
  double aux_share_ = 1.0;
};

}  // namespace sal::model
