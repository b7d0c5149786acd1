// dims.h — the shape of a model of either family (from the job file's `model` section) and of a
// training batch: everything the model, the data loader and the runtime agree on.
#pragma once

#include <cstdint>

#include "core/model_shape.h"

namespace sal::model {

// The operator sizes (layers, d, experts, seq_len, vocab, ffn()) are the ModelShape every part
// shares (core/model_shape.h); the rest only the model itself needs.
struct Dims : ModelShape {
  int heads = 4;
  int top_k = 2;
  float aux_weight = 0.01f;  // Switch load-balancing loss weight
  // Forced routing for experiments: each token's k experts are drawn (deterministically) with the
  // first `hot_experts` experts `skew` times as likely as the others, instead of the gate's top-k.
  // 1 = off (the gate routes).
  float skew = 1.0f;
  int hot_experts = 0;
  // moe-llama's router and attention (moe-gpt: a softmax gate whose top-k weights are not renormalised).
  bool sigmoid_router = false;  // scores sigmoid(logit) (DeepSeek-V3) instead of softmax over the experts
  bool norm_topk = false;       // the k chosen scores renormalised to sum to 1
  float z_loss_weight = 0.0f;   // router z-loss: mean over tokens of logsumexp(logits)^2, times this
  // DeepSeek-V3's auxiliary-loss-free balancing (with router_bias): after each update every
  // expert's routing bias moves by this much, up if the expert was under the mean load, down if over.
  float bias_update = 0.0f;
  int rope_theta = 10000;       // rotary embeddings' base
  float norm_eps = 1e-5f;       // RMSNorm's epsilon (Mixtral's and OLMoE's rms_norm_eps)

  int head_dim() const { return d / heads; }
  int kv_heads() const { return kv() / head_dim(); }

  const ModelShape& shape() const { return *this; }
};

}  // namespace sal::model
