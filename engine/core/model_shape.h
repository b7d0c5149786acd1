// model_shape.h — the one description of a moe-gpt model's operators that every part shares: the
// planner and the checkpoint policy (which units exist and what they weigh), the job driver (how
// many units a dense snapshot has), the workers (how a unit's flat buffer is laid out, how many
// floats a transfer carries) and the simulator (operator names and sizes).
//
// An operator ("unit") is what the engine addresses one at a time — snapshots it, freezes it,
// moves it between workers: the embeddings (token and position tables and the final LayerNorm,
// whose token table is also the LM head), and per layer the dense part (two LayerNorms and the
// attention), the gate, and each expert (d -> 4d -> d with biases). Each unit is one flat fp32
// buffer; the layouts below give the offset of every tensor inside it.
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

// The sizes that decide the operators (the rest of a model's configuration — heads, top-k,
// losses — does not change what a unit holds).
struct ModelShape {
  int layers = 2;
  int d = 64;        // d_model
  int experts = 8;
  int seq_len = 64;  // T: the position table's rows
  int vocab = 256;
  int ffn() const { return 4 * d; }  // each expert: d -> 4d -> d
};

// A view into a unit's flat buffer.
struct Slice {
  size_t offset = 0;
  size_t size = 0;
};

struct EmbeddingLayout {
  Slice tok, pos, lnf_g, lnf_b;  // tok [V,d], pos [T,d]
  size_t total = 0;
};
struct DenseLayout {
  Slice ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b;  // w_qkv [d,3d], w_o [d,d]
  size_t total = 0;
};
struct GateLayout {
  Slice w;  // [d,E]
  size_t total = 0;
};
struct ExpertLayout {
  Slice w1, b1, w2, b2;  // w1 [d,4d], w2 [4d,d]
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
