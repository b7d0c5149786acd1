// frontier_report.cpp — see frontier_report.h.
#include "policy/frontier_report.h"

#include "policy/algo/step_balance.h"

namespace sal::policy {

std::vector<algo::LayerDemand> frontier_demand(const std::vector<std::vector<uint32_t>>& replicas,
                                               const std::vector<std::vector<double>>& loads) {
  std::vector<algo::LayerDemand> out;
  for (size_t l = 0; l < replicas.size(); ++l) {
    algo::LayerDemand d;
    d.replicas.assign(replicas[l].begin(), replicas[l].end());
    if (!loads.empty()) d.loads = loads[l % loads.size()];
    out.push_back(std::move(d));
  }
  return out;
}

nlohmann::ordered_json frontier_json(const algo::Frontier& f) {
  nlohmann::ordered_json j;
  j["points"] = nlohmann::ordered_json::array();
  for (const auto& p : f.points) {
    nlohmann::ordered_json q;
    q["name"] = p.name;
    q["frontier"] = p.on_frontier;
    if (!p.beaten_by.empty()) q["beaten_by"] = p.beaten_by;
    q["balance"] = p.mean_balance;
    q["median"] = algo::median_balance(p);
    q["balances"] = p.balance;
    q["load_balance"] = p.mean_load_balance;
    q["p"] = p.p;
    j["points"].push_back(std::move(q));
  }
  j["bound"] = f.bound;
  j["bound_median"] = algo::median(f.bound);
  j["invalid"] = f.invalid;
  return j;
}

Result<nlohmann::ordered_json> plan_frontier_json(const plan::Plan& p, const std::vector<std::vector<double>>& loads,
                                                  const StepLoads& steps, bool by_counts) {
  if (p.layers.empty()) return fail("the plan has no layers");
  const plan::GroupSpan span = plan::group_span(p, 0);
  std::vector<std::vector<uint32_t>> replicas;
  algo::FrontierCandidate in_force{"in force", {}};
  for (const auto& layer : p.layers) {
    algo::LayerPlacement lp{int(p.experts), {}};
    std::vector<uint32_t> count(p.experts, 0);
    for (uint32_t n = span.first; n < span.first + span.count; ++n) {
      lp.nodes.emplace_back(layer.placement[n].begin(), layer.placement[n].end());
      for (uint32_t e : layer.placement[n]) ++count[e];
    }
    replicas.push_back(std::move(count));
    in_force.layers.push_back(std::move(lp));
  }
  algo::FrontierOptions o;
  o.nodes = int(span.count), o.slots = int(p.slots), o.floor = int(p.floor);
  auto by_layer = algo::steps_by_layer(steps, p.layers.size());
  if (!by_layer) return by_layer.error().with_context("the steps");
  o.steps = std::move(*by_layer);
  o.split_by_counts = by_counts;
  auto f = algo::placement_frontier(frontier_demand(replicas, loads), o, {in_force});
  if (!f) return f.error();
  nlohmann::ordered_json j = frontier_json(*f);
  j["nodes"] = span.count, j["slots"] = p.slots, j["floor"] = p.floor;
  return j;
}

}  // namespace sal::policy
