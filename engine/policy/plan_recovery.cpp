// plan_recovery.cpp — see plan_recovery.h.
#include "policy/plan_recovery.h"

#include "plan/domains.h"

namespace sal::policy {
namespace {

algo::LayerPlacement layer_of(const std::vector<std::vector<plan::ExpertId>>& nodes, uint32_t experts) {
  algo::LayerPlacement lp;
  lp.experts = int(experts);
  for (const auto& node : nodes) lp.nodes.emplace_back(node.begin(), node.end());
  return lp;
}

}  // namespace

std::vector<algo::LayerPlacement> placements_of(const plan::Plan& p) {
  std::vector<algo::LayerPlacement> out;
  for (const auto& l : p.layers) out.push_back(layer_of(l.placement, p.experts));
  return out;
}

std::vector<algo::LayerPlacement> host_placements_of(const plan::Plan& p) {
  if (p.domains.empty()) return placements_of(p);
  std::vector<algo::LayerPlacement> out;
  for (const auto& l : p.layers) out.push_back(layer_of(plan::fold_onto_domains(l, p.domains), p.experts));
  return out;
}

std::vector<algo::LayerPlacement> rack_placements_of(const plan::Plan& p) {
  const auto racks = plan::rack_of_positions(p);
  if (racks.empty()) return {};
  std::vector<algo::LayerPlacement> out;
  for (const auto& l : p.layers) out.push_back(layer_of(plan::fold_onto_domains(l, racks), p.experts));
  return out;
}

uint32_t host_count(const plan::Plan& p) {
  return p.domains.empty() ? p.nodes : plan::domain_count(p.domains);
}

}  // namespace sal::policy
