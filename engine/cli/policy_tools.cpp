// policy_tools.cpp — see policy_tools.h.
#include "cli/policy_tools.h"

#include "policy/kinds.h"

namespace sal::cli {

Result<policy::Proposal> decide_offline(policy::PolicySet& set, policy::Kind kind, const std::string& what,
                                        const policy::Input& in) {
  auto g = set.check(kind, what);
  if (!g) return g.error().with_context(std::string(policy::kind_name(kind)) + " policy " + what);
  auto p = (*g)->decide(in);
  if (!p) return p.error().with_context((*g)->name());
  if (auto s = policy::ops_for(kind).validate(*p, in); !s)
    return s.error().with_context((*g)->name() + " proposed an invalid " + std::string(policy::kind_name(kind)));
  return p;
}

Result<plan::Plan> plan_offline(policy::PolicySet& set, const PlanRequest& req, std::string* note) {
  if (req.loads.empty()) return fail("no loads");
  auto experts = uint32_t(req.loads[0].size());
  policy::AllocationInput ain{req.nodes, req.slots, experts, req.min_replicas, req.loads};
  auto a = decide_offline(set, policy::Kind::allocation, req.allocation, ain);
  if (!a) return a.error();
  const auto& ap = std::get<policy::AllocationProposal>(*a);
  if (note) *note = ap.note;
  policy::PlacementInput pin{req.nodes, req.slots, experts, ap.floor, ap.replicas, req.loads, {}};
  auto p = decide_offline(set, policy::Kind::placement, req.placement, pin);
  if (!p) return p.error();
  const auto& pp = std::get<policy::PlacementProposal>(*p);
  plan::Plan out;
  out.nodes = req.nodes;
  out.slots = req.slots;
  out.experts = experts;
  out.floor = ap.floor;
  for (size_t l = 0; l < ap.replicas.size(); ++l) out.layers.push_back({ap.replicas[l], pp.placement[l]});
  return out;
}

std::vector<algo::LayerPlacement> placements_of(const plan::Plan& p) {
  std::vector<algo::LayerPlacement> out;
  for (const auto& l : p.layers) {
    algo::LayerPlacement lp;
    lp.experts = int(p.experts);
    for (const auto& node : l.placement) lp.nodes.emplace_back(node.begin(), node.end());
    out.push_back(std::move(lp));
  }
  return out;
}

}  // namespace sal::cli
