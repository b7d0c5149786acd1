// hf_config.h — a Hugging Face `config.json` for moe-llama: reading one (import) and writing one
// (export). Read: model_type mixtral, qwen2_moe, olmoe or salamander_moe_llama (what export writes);
// the keys each names its sizes by (hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, num_local_experts | num_experts | n_routed_experts, num_experts_per_tok,
// intermediate_size | moe_intermediate_size, n_shared_experts, vocab_size, max_position_embeddings,
// rope_theta, rms_norm_eps, tie_word_embeddings, norm_topk_prob, scoring_func,
// router_aux_loss_coef, router_z_loss_coef; topk_method greedy, or DeepSeek-V3's noaux_tc: a
// routing bias, with our bias_update_speed; use_qk_norm or qk_layernorm, always for olmoe;
// attention_bias or qkv_bias, always for qwen2_moe; shared_expert_intermediate_size: Qwen2-MoE's
// gated shared expert). What this engine does not build is refused by name (expert biases, layers
// without experts, rope scaling, a head size other than hidden_size / heads, sliding windows,
// group-limited routing, a routed scaling factor).
#pragma once

#include <string>

#include "ckpt/hf_layout.h"
#include "core/result.h"

namespace sal::ckpt {

struct HfModel {
  Dims dims;
  HfNaming naming = HfNaming::mixtral;
  std::string model_type;
};

// config.json's text -> the model; errors name `label` and the key.
Result<HfModel> parse_hf_config(const std::string& text, const std::string& label);

// The config.json an export of `d` writes (model_type mixtral where the model is one: softmax
// router, renormalised top-k, no shared experts; else salamander_moe_llama), and its naming.
std::string hf_config_json(const Dims& d);
HfNaming export_naming(const Dims& d);

}  // namespace sal::ckpt
