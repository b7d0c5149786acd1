// plan.h — plan value types: what the allocation and placement policies decide and what the
// runtime follows. A Plan is, per MoE layer, the number of replicas of each expert and the expert
// held in every slot of every node position. Positions are plan coordinates; remap.h maps physical
// nodes onto them. Expert ids and positions are 0-based here and in plan files (Lua policies see
// them 1-based; the policy layer converts).
//
// Plan file format (JSON, `salamander policy plan --json`):
//   {"nodes": N, "slots": c, "floor": f,
//    "layers": [{"replicas": [r_0, ...], "placement": [[expert ids of node 0's slots], ...]}, ...]}
// ("nodes", "slots" and "floor" are optional when reading: they are derived from the layers.)
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::plan {

using ExpertId = uint32_t;

// One layer: replicas[e] and, per node position, the experts in its slots (repeats allowed: two
// replicas of one expert on one node mean twice the capacity there).
struct LayerPlan {
  std::vector<uint32_t> replicas;
  std::vector<std::vector<ExpertId>> placement;
};

struct Plan {
  uint32_t nodes = 0;
  uint32_t slots = 0;
  uint32_t experts = 0;
  uint32_t floor = 1;  // the fault-tolerance floor the allocation guarantees (f, possibly lowered)
  std::vector<LayerPlan> layers;
};

Result<Plan> plan_from_json(const nlohmann::json& j);
nlohmann::ordered_json plan_to_json(const Plan& p);

// Per expert, the distinct node positions holding it in a layer.
std::vector<std::vector<uint32_t>> expert_nodes(const LayerPlan& layer, uint32_t experts);

}  // namespace sal::plan
