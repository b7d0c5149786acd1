// hf_layout.h — moe-llama's units in the Hugging Face layout, the names and shapes that
// transformers' Mixtral, Qwen-MoE and OLMoE code (and the hubs' checkpoints) use, for `salamander
// import` and `export`. Each HF tensor is a block of columns of one of our tensors: our matrices are
// [in, out] (the engine computes x @ W) and fused ([q | k | v], [gate | up]); HF's are nn.Linear
// weights, [out, in], one per projection. The moving is exact (a transpose and a copy), so a round
// trip gives the same bits.
//
// Names, L a layer, X an expert:
//   model.embed_tokens.weight [V,d]   model.norm.weight [d]   lm_head.weight [V,d] (untied head)
//   model.layers.L.input_layernorm.weight, .post_attention_layernorm.weight [d]
//   model.layers.L.self_attn.{q,k,v,o}_proj.weight [d,d] [kv,d] [kv,d] [d,d], with QK-norm (OLMoE's)
//                   .self_attn.q_norm.weight [d], .self_attn.k_norm.weight [kv], with attention biases
//                   (Qwen2's) .self_attn.{q,k,v}_proj.bias [d] [kv] [kv]
//   Mixtral naming: model.layers.L.block_sparse_moe.gate.weight [E,d],
//                   .block_sparse_moe.experts.X.{w1,w3,w2}.weight [F,d] [F,d] [d,F] (gate, up, down)
//   mlp naming (Qwen-MoE, OLMoE, DeepSeek-MoE): model.layers.L.mlp.gate.weight [E,d],
//                   .mlp.experts.X.{gate_proj,up_proj,down_proj}.weight, and the shared experts
//                   (DeepSeek's) .mlp.shared_experts.{gate_proj,up_proj,down_proj}.weight [S,d] [S,d] [d,S],
//                   and a routing bias (DeepSeek-V3's) .mlp.gate.e_score_correction_bias [E]; or
//                   Qwen2-MoE's gated shared expert .mlp.shared_expert.{gate_proj,up_proj,down_proj}.weight
//                   and .mlp.shared_expert_gate.weight [1,d]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/params.h"

namespace sal::ckpt {

using model::Dims;

enum class HfNaming { mixtral, mlp };

struct HfTensor {
  std::string name;
  UnitId unit;
  Slice slice;                  // the tensor of ours this is (a part of)
  int64_t rows = 1, cols = 0;   // that tensor as we store it: [rows, cols] ([in, out] for a matrix)
  int64_t col0 = 0, ncols = 0;  // the block of its columns that is this HF tensor
  bool transpose = false;       // HF stores [out, in]: the transpose of the block
  std::vector<int64_t> shape() const;  // HF's shape
  size_t elements() const { return size_t(rows) * size_t(ncols); }
};

// Every tensor of a moe-llama model in the HF layout, in model order. Shared experts have names in
// the mlp naming only.
std::vector<HfTensor> hf_tensors(const Dims& d, HfNaming naming);

// Ours -> HF: out [elements()] from the unit's buffer.
void to_hf(const HfTensor& t, const float* unit, float* out);
// HF -> ours: in [elements()] into the unit's buffer.
void from_hf(const HfTensor& t, const float* in, float* unit);

}  // namespace sal::ckpt
