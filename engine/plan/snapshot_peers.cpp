// snapshot_peers.cpp — see snapshot_peers.h.
#include "plan/snapshot_peers.h"

#include <algorithm>
#include <map>
#include <set>

namespace sal::plan {

std::vector<std::pair<int, int>> experts_written(const Plan& plan, uint32_t rank) {
  std::vector<std::pair<int, int>> out;
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    auto holders = expert_nodes(plan.layers[l], plan.experts);
    for (uint32_t e = 0; e < plan.experts; ++e)
      if (!holders[e].empty() && *std::min_element(holders[e].begin(), holders[e].end()) == rank)
        out.push_back({int(l), int(e)});
  }
  return out;
}

std::vector<std::vector<uint32_t>> snapshot_peers(const Plan& plan, const std::vector<uint32_t>& node_of_rank,
                                                  uint32_t copies) {
  std::vector<uint32_t> nodes(node_of_rank.begin(), node_of_rank.end());
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  // the nodes holding each expert
  std::map<std::pair<int, int>, std::set<uint32_t>> holders;
  for (size_t l = 0; l < plan.layers.size(); ++l)
    for (size_t pos = 0; pos < plan.layers[l].placement.size() && pos < node_of_rank.size(); ++pos)
      for (ExpertId e : plan.layers[l].placement[pos]) holders[{int(l), int(e)}].insert(node_of_rank[pos]);
  std::map<uint32_t, size_t> chosen;  // how many ranks each node holds slices for
  std::vector<std::vector<uint32_t>> out(node_of_rank.size());
  for (uint32_t rank = 0; rank < node_of_rank.size(); ++rank) {
    std::set<uint32_t> shares_operators;
    for (const auto& ex : experts_written(plan, rank))
      for (uint32_t n : holders[ex]) shares_operators.insert(n);
    std::vector<uint32_t> apart, beside;  // nodes holding none of its experts, and the others
    for (uint32_t n : nodes)
      if (n != node_of_rank[rank]) (shares_operators.count(n) ? beside : apart).push_back(n);
    auto fewest_first = [&](uint32_t a, uint32_t b) { return chosen[a] < chosen[b]; };
    std::stable_sort(apart.begin(), apart.end(), fewest_first);
    std::stable_sort(beside.begin(), beside.end(), fewest_first);
    // apart first, then beside, alternating while both last
    std::vector<uint32_t> picked;
    size_t a = 0, b = 0;
    while (picked.size() < copies && (a < apart.size() || b < beside.size())) {
      bool from_apart = a < apart.size() && (b >= beside.size() || picked.size() % 2 == 0);
      picked.push_back(from_apart ? apart[a++] : beside[b++]);
    }
    for (uint32_t n : picked) ++chosen[n];
    out[rank] = std::move(picked);
  }
  return out;
}

}  // namespace sal::plan
