// params.h — the model's parameters as addressable operator units: the embeddings (token and
// position tables and the final LayerNorm, whose token table is also the LM head), and per layer
// the dense part (LayerNorms, attention), the gate, and each expert. A unit owns its weights, their
// gradient and AdamW's two moments, so later issues can snapshot, freeze and migrate units one by
// one. A worker holds every non-expert unit and only the experts its plan assigns.
//
// Initialization is a pure function of (seed, unit): N(0, 0.02) for matrices (the attention and
// expert output projections scaled by 1/sqrt(2L), as GPT-2 does), zeros for biases, ones for
// LayerNorm gains. Any worker that is given an expert creates exactly the same weights.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/dims.h"

namespace sal::model {

enum class UnitKind : uint8_t { embedding, dense, gate, expert };

struct UnitId {
  UnitKind kind = UnitKind::embedding;
  int layer = -1;
  int expert = -1;
  std::string name() const;  // "embedding", "layer3.dense", "layer3.gate", "layer3.expert7"
  auto operator<=>(const UnitId&) const = default;
};

// A view into a unit's flat buffer.
struct Slice {
  size_t offset = 0;
  size_t size = 0;
};

// Offsets of the tensors inside each kind of unit.
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

EmbeddingLayout embedding_layout(const Dims& d);
DenseLayout dense_layout(const Dims& d);
GateLayout gate_layout(const Dims& d);
ExpertLayout expert_layout(const Dims& d);
size_t unit_size(const Dims& d, UnitKind k);

struct Unit {
  UnitId id;
  std::vector<float> w, g, m, v;  // weights, gradient, Adam moments (all the same length)

  float* at(Slice s) { return w.data() + s.offset; }
  const float* at(Slice s) const { return w.data() + s.offset; }
  float* grad(Slice s) { return g.data() + s.offset; }
  void zero_grad();
};

// Creates a unit with its deterministic initial weights (zero gradient and moments).
Unit make_unit(const Dims& d, UnitId id, uint64_t seed);

// Everything one worker holds.
struct Params {
  Dims dims;
  Unit embedding;
  std::vector<Unit> dense, gate;                     // per layer
  std::map<std::pair<int, int>, Unit> experts;       // (layer, expert) -> unit, only those held

  static Params create(const Dims& d, uint64_t seed,
                       const std::vector<std::pair<int, int>>& held_experts);
  // Every (layer, expert) of d, in order: what one worker holding the whole model holds.
  static std::vector<std::pair<int, int>> all_experts(const Dims& d);
  Unit* expert(int layer, int e);
  // Every unit this worker holds, in a fixed order (embedding, per layer dense, gate, experts).
  std::vector<Unit*> units();
  // The units every worker holds (units() without the experts), in the same order.
  std::vector<Unit*> non_expert_units();
  void zero_grads();
  size_t parameter_count() const;
};

}  // namespace sal::model
