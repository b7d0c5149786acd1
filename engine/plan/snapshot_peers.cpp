// snapshot_peers.cpp — see snapshot_peers.h.
#include "plan/snapshot_peers.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "plan/unit_writers.h"

namespace sal::plan {

std::vector<std::vector<uint32_t>> snapshot_peers(const Plan& plan, const std::vector<uint32_t>& node_of_rank,
                                                  uint32_t copies, const std::map<uint32_t, std::string>& rack_of) {
  auto same_rack = [&](uint32_t a, uint32_t b) {
    auto ra = rack_of.find(a), rb = rack_of.find(b);
    return a == b || (ra != rack_of.end() && rb != rack_of.end() && ra->second == rb->second);
  };
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
    std::set<uint32_t> writes_with, holds_with;  // the nodes holding an expert the rank writes, holds
    for (const auto& ex : experts_written(plan, rank))
      for (uint32_t n : holders[ex]) writes_with.insert(n);
    for (size_t l = 0; l < plan.layers.size(); ++l)
      for (ExpertId e : rank < plan.layers[l].placement.size() ? plan.layers[l].placement[rank] : std::vector<ExpertId>{})
        for (uint32_t n : holders[{int(l), int(e)}]) holds_with.insert(n);
    const uint32_t home = node_of_rank[rank];
    std::vector<uint32_t> others;  // every other node, in order
    for (uint32_t n : nodes)
      if (n != home) others.push_back(n);
    // Each copy in turn: the node in the rack holding the fewest copies yet (racks named: the copies
    // span the racks), then away from the writer's rack, then of the kind whose turn it is (apart —
    // holding none of the experts it holds, else none it writes — first, then beside — holding some
    // it writes, else some it holds — alternating), then the fewest chosen.
    std::vector<uint32_t> picked;
    while (picked.size() < copies && picked.size() < others.size()) {
      const bool apart_turn = picked.size() % 2 == 0;
      auto key = [&](uint32_t n) {
        auto copies_there = std::count_if(picked.begin(), picked.end(), [&](uint32_t m) { return same_rack(n, m); });
        const bool writes = writes_with.count(n) != 0, holds = holds_with.count(n) != 0;
        auto off_turn = apart_turn ? std::pair(holds, writes) : std::pair(!writes, !holds);
        return std::tuple(copies_there, same_rack(n, home), off_turn, chosen[n]);
      };
      uint32_t best = UINT32_MAX;
      for (uint32_t n : others)
        if (std::find(picked.begin(), picked.end(), n) == picked.end() && (best == UINT32_MAX || key(n) < key(best)))
          best = n;
      picked.push_back(best);
    }
    for (uint32_t n : picked) ++chosen[n];
    out[rank] = std::move(picked);
  }
  return out;
}

}  // namespace sal::plan
