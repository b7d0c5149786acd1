// fixed_ep.cpp — see fixed_ep.h.
#include "plan/fixed_ep.h"

#include <algorithm>

namespace sal::plan {

uint32_t ep_size(uint32_t experts, uint32_t slots) { return slots == 0 ? 0 : (experts + slots - 1) / slots; }

Result<Plan> fixed_ep_plan(uint32_t layers, uint32_t experts, uint32_t slots, uint32_t groups) {
  uint32_t ep = ep_size(experts, slots);
  if (ep == 0 || groups == 0 || experts == 0) return fail("a fixed expert-parallel plan needs experts, slots and a group");
  uint32_t per = (experts + ep - 1) / ep;  // experts in one member's slice
  Plan p;
  p.nodes = groups * ep;
  p.slots = slots;
  p.experts = experts;
  p.floor = groups;
  for (uint32_t l = 0; l < layers; ++l) {
    LayerPlan lp;
    lp.replicas.assign(experts, 0);
    for (uint32_t r = 0; r < p.nodes; ++r) {
      uint32_t first = (r % ep) * per, count = std::min(per, experts - std::min(experts, first));
      if (count == 0) return fail("EP member ", r % ep, " of ", ep, " gets no expert (", experts, " experts)");
      std::vector<ExpertId> held;
      for (uint32_t s = 0; s < slots; ++s) held.push_back(first + s % count);
      for (auto e : held) ++lp.replicas[e];
      lp.placement.push_back(std::move(held));
    }
    p.layers.push_back(std::move(lp));
  }
  return p;
}

}  // namespace sal::plan
