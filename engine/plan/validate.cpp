// validate.cpp — see validate.h.
#include "plan/validate.h"

#include <algorithm>

namespace sal::plan {

Floor effective_floor(uint32_t f, uint32_t nodes, uint32_t slots, uint32_t experts) {
  Floor out{std::max<uint32_t>(f, 1), ""};
  if (experts == 0) return out;
  uint64_t capacity = uint64_t(nodes) * slots;
  if (capacity >= uint64_t(out.f) * experts) return out;
  uint32_t lowered = std::max<uint32_t>(uint32_t(capacity / experts), 1);
  out.note = "f lowered from " + std::to_string(out.f) + " to " + std::to_string(lowered) + ": " +
             std::to_string(nodes) + " nodes x " + std::to_string(slots) + " slots = " +
             std::to_string(capacity) + " < f x " + std::to_string(experts) + " experts";
  out.f = lowered;
  return out;
}

Status check_allocation(const std::vector<uint32_t>& replicas, uint32_t experts, uint32_t nodes,
                        uint32_t slots, uint32_t floor, uint32_t base) {
  if (replicas.size() != experts)
    return fail("replicas has ", replicas.size(), " entries for ", experts, " experts");
  uint64_t sum = 0;
  for (uint32_t e = 0; e < experts; ++e) {
    if (replicas[e] == 0) return fail("expert ", e + base, " has no replica (every expert needs at least 1)");
    if (replicas[e] < floor)
      return fail("expert ", e + base, " has ", replicas[e], " replicas, below the floor f = ", floor);
    sum += replicas[e];
  }
  uint64_t capacity = uint64_t(nodes) * slots;
  if (sum != capacity)
    return fail("replicas add up to ", sum, " but must fill the N x c = ", nodes, " x ", slots, " = ",
                capacity, " slots exactly");
  return {};
}

Status check_placement(const LayerPlan& layer, uint32_t experts, uint32_t nodes, uint32_t slots,
                       uint32_t floor, uint32_t base) {
  if (layer.placement.size() != nodes)
    return fail("placement has ", layer.placement.size(), " nodes, the plan has ", nodes);
  std::vector<uint32_t> count(experts, 0);
  for (uint32_t n = 0; n < nodes; ++n) {
    const auto& node = layer.placement[n];
    if (node.size() != slots) return fail("node ", n + base, " has ", node.size(), " slots filled, must be ", slots);
    for (ExpertId e : node) {
      if (e >= experts) return fail("node ", n + base, " holds expert ", e + base, ", but there are only ", experts);
      ++count[e];
    }
  }
  for (uint32_t e = 0; e < experts; ++e)
    if (e < layer.replicas.size() && count[e] != layer.replicas[e])
      return fail("expert ", e + base, " is placed ", count[e], " times but allocated ", layer.replicas[e],
                  " replicas");
  auto spans = expert_nodes(layer, experts);
  uint32_t need_base = std::min(floor, nodes);
  for (uint32_t e = 0; e < experts; ++e) {
    uint32_t need = std::min(need_base, layer.replicas.empty() ? need_base : layer.replicas[e]);
    if (spans[e].size() < need)
      return fail("expert ", e + base, " spans ", spans[e].size(), " node(s) but must span at least min(f, N) = ",
                  need, " distinct nodes");
  }
  return {};
}

Status check_plan(const Plan& p) {
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const auto& layer = p.layers[l];
    if (auto s = check_allocation(layer.replicas, p.experts, p.nodes, p.slots, p.floor); !s)
      return Error("layer " + std::to_string(l) + " allocation: " + s.error().message());
    if (auto s = check_placement(layer, p.experts, p.nodes, p.slots, p.floor); !s)
      return Error("layer " + std::to_string(l) + " placement: " + s.error().message());
  }
  return {};
}

}  // namespace sal::plan
