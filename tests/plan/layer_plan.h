// layer_plan.h — a one-layer plan from its placement, for the plan tests: replica counts counted
// from the slots, nodes and slots from the table's shape.
#pragma once

#include <vector>

#include "plan/plan.h"

namespace sal::plan::test {

inline Plan one_layer(std::vector<std::vector<ExpertId>> placement, uint32_t experts) {
  Plan p;
  p.nodes = uint32_t(placement.size());
  p.slots = uint32_t(placement[0].size());
  p.experts = experts;
  LayerPlan l;
  l.replicas.assign(experts, 0);
  for (auto& n : placement)
    for (auto e : n) ++l.replicas[e];
  l.placement = std::move(placement);
  p.layers.push_back(std::move(l));
  return p;
}

}  // namespace sal::plan::test
