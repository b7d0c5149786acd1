// frontier_report.cpp — see frontier_report.h.
#include "policy/frontier_report.h"

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
    q["p"] = p.p;
    j["points"].push_back(std::move(q));
  }
  j["bound"] = f.bound;
  j["bound_median"] = algo::median(f.bound);
  j["invalid"] = f.invalid;
  return j;
}

}  // namespace sal::policy
