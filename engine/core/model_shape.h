// model_shape.h — the one description of a model's operators (either family) that every part shares: the
// planner and the checkpoint policy (which units exist and what they weigh), the job driver (how
// many units a dense snapshot has), the workers (how a unit's flat buffer is laid out, how many
// floats a transfer carries) and the simulator (operator names and sizes).
//
// An operator ("unit") is what the engine addresses one at a time — snapshots it, freezes it,
// moves it between workers: the embeddings (token table, moe-gpt's position table and final
// LayerNorm or moe-llama's final RMSNorm and untied head), and per layer the dense part (norms,
// attention, moe-llama's shared experts), the gate, and each expert (moe-gpt: d -> ffn -> d GELU
// with biases; moe-llama: SwiGLU). Each unit is one flat fp32 buffer; the layouts below give the
// offset of every tensor inside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sal {

enum class UnitKind : uint8_t { embedding, dense, gate, expert };
constexpr int kUnitKinds = 4;
const char* unit_kind_name(UnitKind k);  // "embedding", "dense", "gate", "expert"

struct UnitId {
  UnitKind kind = UnitKind::embedding;
  int layer = -1;   // -1 for the embeddings
  int expert = -1;  // -1 but for experts
  std::string name() const;  // "embedding", "layer3.dense", "layer3.gate", "layer3.expert7"
  auto operator<=>(const UnitId&) const = default;
};

// The model families (job file: model.kind): moe-gpt (GPT-2's block) and moe-llama (RMSNorm,
// rotary positions, grouped-query attention, SwiGLU experts, optional shared experts).
enum class ModelFamily : uint8_t { gpt, llama };
const char* family_name(ModelFamily f);  // "moe-gpt", "moe-llama"
std::optional<ModelFamily> parse_family(const std::string& name);

// The sizes that decide the operators (the rest of a model's configuration — heads, top-k,
// losses — does not change what a unit holds).
struct ModelShape {
  int layers = 2;
  int d = 64;        // d_model
  int experts = 8;
  int seq_len = 64;  // T: moe-gpt's position table's rows
  int vocab = 256;
  ModelFamily family = ModelFamily::gpt;
  int expert_ffn = 0;     // each routed expert's hidden width (0: 4d)
  int kv_dim = 0;         // moe-llama: the width of K and of V per token (grouped-query attention; 0: d)
  int shared_ffn = 0;     // moe-llama: the shared experts' hidden width, all together (0: none)
  bool tied_head = true;  // moe-llama: the LM head is the token embedding (else a matrix of its own)
  // moe-llama: each gate carries DeepSeek-V3's per-expert routing bias (auxiliary-loss-free
  // balancing, model/router_bias.h), added to the scores to choose the k experts only.
  bool router_bias = false;
  // moe-llama: RMSNorm on the queries (over d) and on the keys (over kv) before the rotary
  // positions, each with a gain of its own (OLMoE's QK-norm).
  bool qk_norm = false;
  // moe-llama: the query, key and value projections have biases (Qwen2-MoE's).
  bool attn_bias = false;
  // moe-llama: the shared experts' output is scaled per token by sigmoid(x . w), w a vector of the
  // dense unit (Qwen2-MoE's shared_expert_gate).
  bool shared_gate = false;
  int ffn() const { return expert_ffn > 0 ? expert_ffn : 4 * d; }  // each expert: d -> ffn -> d
  int kv() const { return kv_dim > 0 ? kv_dim : d; }
  bool llama() const { return family == ModelFamily::llama; }
};

// A view into a unit's flat buffer.
struct Slice {
  size_t offset = 0;
  size_t size = 0;
};

// A family's tensors that the other family lacks are empty slices (size 0), so one layout struct
// serves both: moe-llama has no position table, no biases, no LayerNorm shifts (its norms are
// RMSNorms: a gain only); moe-gpt has no untied head and no shared experts.
struct EmbeddingLayout {
  Slice tok, pos, lnf_g, lnf_b;  // tok [V,d], pos [T,d] (moe-gpt)
  Slice head;                    // moe-llama untied: [d,V]
  size_t total = 0;
};
struct DenseLayout {
  // w_qkv [d, d + 2 kv] ([q | k | v] columns; kv = d for moe-gpt), b_qkv [d + 2 kv] (moe-gpt, and
  // moe-llama with attn_bias), w_o [d,d]
  Slice ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b;
  Slice sh_w13, sh_w2;  // moe-llama's shared experts: [d, 2S] ([gate | up] columns), [S, d]
  Slice q_norm, k_norm;  // moe-llama's QK-norm gains: [d], [kv]
  Slice sh_gate;         // moe-llama's shared-expert gate (Qwen2-MoE's): [d]
  size_t total = 0;
};
struct GateLayout {
  Slice w;     // [d,E]
  Slice bias;  // [E], with router_bias: no gradient, moved by the balancing rule alone
  size_t total = 0;
};
struct ExpertLayout {
  // moe-gpt: w1 [d,F], b1 [F], w2 [F,d], b2 [d] (GELU); moe-llama: w1 [d,2F] ([gate | up] columns,
  // SwiGLU), w2 [F,d], no biases.
  Slice w1, b1, w2, b2;
  size_t total = 0;
};

EmbeddingLayout embedding_layout(const ModelShape& s);
DenseLayout dense_layout(const ModelShape& s);
GateLayout gate_layout(const ModelShape& s);
ExpertLayout expert_layout(const ModelShape& s);
// Parameters (floats) of one unit of a kind.
size_t unit_size(const ModelShape& s, UnitKind k);

// Bytes of one parameter: the fp32 weight a forward pass reads (what a frozen operator needs), and
// the weight with AdamW's two moments (a full snapshot: everything an update needs).
constexpr double kComputeBytesPerParam = 4;
constexpr double kFullBytesPerParam = 12;

// Every unit of the model in its canonical order: the embeddings, then per layer its dense part,
// its gate and its experts in order. Operator indices (a checkpoint schedule's) index this list.
std::vector<UnitId> model_units(const ModelShape& s);
size_t model_unit_count(const ModelShape& s);
// The position of a unit in model_units(), or -1 when the shape has no such unit.
long unit_index(const ModelShape& s, const UnitId& id);
// The unit a name (UnitId::name(): "embedding", "layer3.dense", "layer3.gate", "layer3.expert7")
// stands for, whatever the model; none when the text is no such name.
std::optional<UnitId> parse_unit_name(const std::string& name);

}  // namespace sal
