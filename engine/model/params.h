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
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/dims.h"

namespace sal::model {

// The unit vocabulary and the layouts are the shared model description (core/model_shape.h).
using ::sal::UnitKind;
using ::sal::UnitId;
using ::sal::Slice;
using ::sal::EmbeddingLayout;
using ::sal::DenseLayout;
using ::sal::GateLayout;
using ::sal::ExpertLayout;
using ::sal::embedding_layout;
using ::sal::dense_layout;
using ::sal::gate_layout;
using ::sal::expert_layout;
using ::sal::unit_size;

struct Unit {
  UnitId id;
  std::vector<float> w, g, m, v;  // weights, gradient, Adam moments (all the same length)
  // Frozen (MoEtion's replay of a sparse snapshot): the unit runs forward and passes the input
  // gradient back, but computes no weight gradient and takes no optimizer update.
  bool frozen = false;

  float* at(Slice s) { return w.data() + s.offset; }
  const float* at(Slice s) const { return w.data() + s.offset; }
  float* grad(Slice s) { return g.data() + s.offset; }
  // Where the backward accumulates this slice's weight gradient: null for a frozen unit.
  float* weight_grad(Slice s) { return frozen ? nullptr : grad(s); }
  void zero_grad();
};

// A unit's values and moments where someone else keeps them (a snapshot's copy in pinned host
// memory, or units copied on the host): what a snapshot writes or keeps.
struct UnitView {
  UnitId id;
  const float* w = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;
  size_t size = 0;  // floats in each of w, m, v
};

// Views into memory that `keep` holds until it is dropped (a GPU's pinned staging goes back to the
// device's next snapshot then).
struct UnitViews {
  std::vector<UnitView> units;
  std::shared_ptr<const void> keep;
};

// The views of `units`, which the result keeps.
UnitViews views_of(std::vector<Unit> units);
// Owned copies of the views' units (id, w, m, v; g empty).
std::vector<Unit> copy_units(const UnitViews& views);

// Creates a unit with its deterministic initial weights (zero gradient and moments).
Unit make_unit(const Dims& d, UnitId id, uint64_t seed);
// A unit of the right size, every float zero: for state that is loaded over it at once (a restore),
// where drawing the initial weights only costs time.
Unit blank_unit(const Dims& d, UnitId id);

// Everything one worker holds.
struct Params {
  Dims dims;
  Unit embedding;
  std::vector<Unit> dense, gate;                     // per layer
  std::map<std::pair<int, int>, Unit> experts;       // (layer, expert) -> unit, only those held

  static Params create(const Dims& d, uint64_t seed,
                       const std::vector<std::pair<int, int>>& held_experts);
  // The same units, blank (blank_unit): what a restore loads every unit into.
  static Params shaped(const Dims& d, const std::vector<std::pair<int, int>>& held_experts);
  // Every (layer, expert) of d, in order: what one worker holding the whole model holds.
  static std::vector<std::pair<int, int>> all_experts(const Dims& d);
  Unit* expert(int layer, int e);
  // The unit `id` names, if this worker holds it (null: not held, or no such unit).
  Unit* unit(const UnitId& id);
  const Unit* unit(const UnitId& id) const;
  // Every unit this worker holds, in a fixed order (embedding, per layer dense, gate, experts).
  std::vector<Unit*> units();
  // The units every worker holds (units() without the experts), in the same order.
  std::vector<Unit*> non_expert_units();
  void zero_grads();
  size_t parameter_count() const;
};

}  // namespace sal::model
