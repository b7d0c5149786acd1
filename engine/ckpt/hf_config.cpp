// hf_config.cpp — see hf_config.h.
#include "ckpt/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace sal::ckpt {
namespace {

using json = nlohmann::json;

constexpr const char* kOurType = "salamander_moe_llama";
// Our own key beside DeepSeek-V3's topk_method = "noaux_tc": the routing bias's step (model.bias_update;
// DeepSeek-V3's configs do not record it: its paper's 0.001 when absent).
constexpr const char* kBiasSpeed = "bias_update_speed";
constexpr double kDeepSeekBiasSpeed = 0.001;

// The first of `keys` the config has, as a positive integer; `fallback` when none is there (fails
// when it is required, i.e. fallback < 0).
Result<int> positive(const json& c, std::initializer_list<const char*> keys, int fallback = -1) {
  for (const char* k : keys) {
    if (!c.contains(k) || c[k].is_null()) continue;
    if (!c[k].is_number_integer() || c[k].get<int64_t>() < 1 || c[k].get<int64_t>() > (int64_t(1) << 30))
      return fail(k, ": expected a positive integer, got ", c[k].dump());
    return int(c[k].get<int64_t>());
  }
  if (fallback >= 0) return fallback;
  std::string names;
  for (const char* k : keys) names += std::string(names.empty() ? "" : " or ") + k;
  return fail("no ", names);
}

// A count that may be none: 0 when absent, null or 0 (exports before 2026-11-29 wrote
// n_shared_experts = 0), else a positive integer.
Result<int> optional_count(const json& c, const char* key) {
  if (c.contains(key) && c[key].is_number_integer() && c[key].get<int64_t>() == 0) return 0;
  return positive(c, {key}, 0);
}

Result<double> number(const json& c, const char* key, double fallback) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_number()) return fail(key, ": expected a number, got ", c[key].dump());
  return c[key].get<double>();
}

Result<bool> flag(const json& c, const char* key, bool fallback) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_boolean()) return fail(key, ": expected true or false, got ", c[key].dump());
  return c[key].get<bool>();
}

// What the engine does not build, each named by the key that asks for it.
Status refuse_unbuilt(const json& c, int d, int heads) {
  if (c.value("mlp_bias", false) == true) return fail("mlp_bias: true, but moe-llama's experts have no biases");
  if (c.value("decoder_sparse_step", 1) != 1 || (c.contains("mlp_only_layers") && c["mlp_only_layers"].is_array() &&
                                                  !c["mlp_only_layers"].empty()))
    return fail(c.value("decoder_sparse_step", 1) != 1 ? "decoder_sparse_step" : "mlp_only_layers",
                ": layers without experts are not built (every moe-llama layer is an MoE layer)");
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    return fail("rope_scaling: scaled rotary positions are not built (plain rope_theta only)");
  if (c.contains("sliding_window") && !c["sliding_window"].is_null() && c.value("use_sliding_window", true))
    return fail("sliding_window: windowed attention is not built (the attention is full and causal)");
  if (c.contains("head_dim") && c["head_dim"].is_number_integer() && c["head_dim"].get<int>() * heads != d)
    return fail("head_dim: ", c["head_dim"].get<int>(), ", but moe-llama's head size is hidden_size / ",
                "num_attention_heads = ", d / heads);
  return {};
}

// Qwen2-MoE's shared expert: one, shared_expert_intermediate_size wide (0 or absent: none), its
// output scaled by a learned sigmoid per token; a whole number of the routed experts' width here.
Status read_gated_shared(const json& c, int ungated, Dims& d) {
  const char* key = "shared_expert_intermediate_size";
  auto width = optional_count(c, key);
  if (!width) return width.error();
  if (*width == 0) return {};
  if (ungated > 0) return fail(key, ": and n_shared_experts = ", ungated, ": one kind of shared expert, not both");
  if (*width % d.expert_ffn != 0)
    return fail(key, ": ", *width, " is not a whole number of the experts' width ", d.expert_ffn,
                " (moe-llama's shared experts are each as wide as a routed one)");
  d.shared_ffn = *width;
  d.shared_gate = true;
  return {};
}

// topk_method: greedy (plain top-k), or DeepSeek-V3's noaux_tc (a routing bias) over one group.
Status read_topk_method(const json& c, Dims& d) {
  const std::string method = c.value("topk_method", std::string("greedy"));
  if (method != "greedy" && method != "noaux_tc")
    return fail("topk_method: '", method, "' is not built (greedy, or noaux_tc with one group)");
  if (method == "greedy") return {};
  for (const char* k : {"n_group", "topk_group"})
    if (c.contains(k) && c[k].is_number_integer() && c[k].get<int64_t>() > 1)
      return fail(k, ": ", c[k].get<int64_t>(), ", but group-limited routing is not built (one group only)");
  auto scale = number(c, "routed_scaling_factor", 1);
  if (!scale) return scale.error();
  if (*scale != 1) return fail("routed_scaling_factor: ", *scale, " is not built (1 only)");
  auto speed = number(c, kBiasSpeed, kDeepSeekBiasSpeed);
  if (!speed) return speed.error();
  if (!(*speed > 0 && *speed <= 1)) return fail(kBiasSpeed, ": ", *speed, " is not in (0, 1]");
  d.router_bias = true;
  d.bias_update = float(*speed);
  return {};
}

Result<HfModel> parse(const json& c) {
  HfModel m;
  if (!c.contains("model_type") || !c["model_type"].is_string()) return fail("model_type: missing");
  m.model_type = c["model_type"].get<std::string>();
  const bool mixtral = m.model_type == "mixtral";
  if (!mixtral && m.model_type != "qwen2_moe" && m.model_type != "olmoe" && m.model_type != kOurType)
    return fail("model_type: '", m.model_type, "' is not one this engine imports (mixtral, qwen2_moe, olmoe, ", kOurType,
                ")");
  Dims& d = m.dims;
  d.family = ModelFamily::llama;
  auto take = [](Result<int> r, int& into) -> Status {
    if (!r) return r.error();
    into = *r;
    return {};
  };
  SAL_TRY(take(positive(c, {"hidden_size"}), d.d));
  SAL_TRY(take(positive(c, {"num_hidden_layers"}), d.layers));
  SAL_TRY(take(positive(c, {"num_attention_heads"}), d.heads));
  SAL_TRY(refuse_unbuilt(c, d.d, d.heads));
  if (d.d % d.heads != 0 || (d.d / d.heads) % 2 != 0)
    return fail("num_attention_heads: ", d.heads, " heads of hidden_size ", d.d, " are not of an even head size");
  int kv_heads = 0;
  SAL_TRY(take(positive(c, {"num_key_value_heads"}, d.heads), kv_heads));
  if (d.heads % kv_heads != 0) return fail("num_key_value_heads: ", kv_heads, " does not divide ", d.heads, " heads");
  d.kv_dim = d.d / d.heads * kv_heads;
  SAL_TRY(take(positive(c, {"num_local_experts", "num_experts", "n_routed_experts"}), d.experts));
  SAL_TRY(take(positive(c, {"num_experts_per_tok"}), d.top_k));
  if (d.top_k > d.experts) return fail("num_experts_per_tok: ", d.top_k, " is more than the ", d.experts, " experts");
  SAL_TRY(take(positive(c, mixtral ? std::initializer_list<const char*>{"intermediate_size"}
                                   : std::initializer_list<const char*>{"moe_intermediate_size", "intermediate_size"}),
               d.expert_ffn));
  int shared = 0;
  SAL_TRY(take(optional_count(c, "n_shared_experts"), shared));
  d.shared_ffn = shared * d.expert_ffn;
  SAL_TRY(read_gated_shared(c, shared, d));
  SAL_TRY(take(positive(c, {"vocab_size"}), d.vocab));
  SAL_TRY(take(positive(c, {"max_position_embeddings"}, 4096), d.seq_len));
  auto theta = number(c, "rope_theta", 10000);
  auto eps = number(c, "rms_norm_eps", 1e-5);
  auto aux = number(c, "router_aux_loss_coef", 0.01);
  auto z = number(c, "router_z_loss_coef", 0);
  auto tied = flag(c, "tie_word_embeddings", false);
  auto norm = flag(c, "norm_topk_prob", mixtral);  // Mixtral renormalises always
  for (const Error* e : {theta ? nullptr : &theta.error(), eps ? nullptr : &eps.error(), aux ? nullptr : &aux.error(),
                         z ? nullptr : &z.error(), tied ? nullptr : &tied.error(), norm ? nullptr : &norm.error()})
    if (e) return *e;
  if (*theta < 1 || *theta > 1e9 || std::floor(*theta) != *theta)
    return fail("rope_theta: ", *theta, " (a whole number in [1, 1e9] here)");
  if (!(*eps > 0 && *eps < 1)) return fail("rms_norm_eps: ", *eps, " is not in (0, 1)");
  d.rope_theta = int(*theta);
  d.norm_eps = float(*eps);
  d.aux_weight = float(*aux);
  d.z_loss_weight = float(*z);
  d.tied_head = *tied;
  d.norm_topk = *norm;
  const std::string scoring = c.value("scoring_func", std::string("softmax"));
  if (scoring != "softmax" && scoring != "sigmoid") return fail("scoring_func: '", scoring, "' (softmax or sigmoid)");
  d.sigmoid_router = scoring == "sigmoid";
  SAL_TRY(read_topk_method(c, d));
  // QK-norm: OLMoE's always; ours (and others') by flag
  auto qk = flag(c, "use_qk_norm", m.model_type == "olmoe");
  if (!qk) return qk.error();
  auto qk_layernorm = flag(c, "qk_layernorm", false);
  if (!qk_layernorm) return qk_layernorm.error();
  d.qk_norm = *qk || *qk_layernorm;
  // attention biases: Qwen2-MoE's always; others' by flag
  auto attention_bias = flag(c, "attention_bias", m.model_type == "qwen2_moe");
  if (!attention_bias) return attention_bias.error();
  auto qkv_bias = flag(c, "qkv_bias", false);
  if (!qkv_bias) return qkv_bias.error();
  d.attn_bias = *attention_bias || *qkv_bias;
  if (mixtral && d.qk_norm) return fail("use_qk_norm: Mixtral has no QK-norm");
  m.naming = mixtral ? HfNaming::mixtral : HfNaming::mlp;
  if (mixtral && d.shared_ffn > 0) return fail("n_shared_experts: Mixtral has no shared experts");
  return m;
}

}  // namespace

Result<HfModel> parse_hf_config(const std::string& text, const std::string& label) {
  auto c = json::parse(text, nullptr, false);
  if (c.is_discarded() || !c.is_object()) return fail(label, ": not a JSON object");
  auto m = parse(c);
  if (!m) return m.error().with_context(label);
  return m;
}

HfNaming export_naming(const Dims& d) {
  const bool plain = !d.router_bias && !d.qk_norm && !d.attn_bias;  // (Mixtral has none of them)
  return !d.sigmoid_router && d.norm_topk && d.shared_ffn == 0 && plain ? HfNaming::mixtral : HfNaming::mlp;
}

std::string hf_config_json(const Dims& d) {
  const bool mixtral = export_naming(d) == HfNaming::mixtral;
  json c = json::object();
  c["model_type"] = mixtral ? "mixtral" : kOurType;
  if (mixtral) c["architectures"] = {"MixtralForCausalLM"};
  c["hidden_size"] = d.d;
  c["num_hidden_layers"] = d.layers;
  c["num_attention_heads"] = d.heads;
  c["num_key_value_heads"] = d.kv_heads();
  c[mixtral ? "num_local_experts" : "n_routed_experts"] = d.experts;
  c["num_experts_per_tok"] = d.top_k;
  c[mixtral ? "intermediate_size" : "moe_intermediate_size"] = d.ffn();
  if (!mixtral) {
    if (d.shared_ffn > 0 && d.shared_gate) c["shared_expert_intermediate_size"] = d.shared_ffn;
    else if (d.shared_ffn > 0) c["n_shared_experts"] = d.shared_ffn / d.ffn();
    c["attention_bias"] = d.attn_bias;
    c["norm_topk_prob"] = d.norm_topk;
    c["scoring_func"] = d.sigmoid_router ? "sigmoid" : "softmax";
    c["router_z_loss_coef"] = d.z_loss_weight;
    c["use_qk_norm"] = d.qk_norm;
    // DeepSeek-V3's keys for a routing bias: one group of experts is plain top-k over biased scores
    c["topk_method"] = d.router_bias ? "noaux_tc" : "greedy";
    if (d.router_bias) {
      c["n_group"] = 1;
      c["topk_group"] = 1;
      c[kBiasSpeed] = d.bias_update;
    }
  }
  c["vocab_size"] = d.vocab;
  c["max_position_embeddings"] = d.seq_len;
  c["rope_theta"] = double(d.rope_theta);
  c["rms_norm_eps"] = double(d.norm_eps);
  c["tie_word_embeddings"] = d.tied_head;
  c["router_aux_loss_coef"] = d.aux_weight;
  c["hidden_act"] = "silu";
  c["torch_dtype"] = "float32";
  return c.dump(2) + "\n";
}

}  // namespace sal::ckpt
