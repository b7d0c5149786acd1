// snapshot_peers.cpp — see snapshot_peers.h.
#include "plan/snapshot_peers.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include "plan/unit_writers.h"

namespace sal::plan {
namespace {

// The experts each node holds, as bit sets, and how many two nodes hold in common: two copies on
// nodes that share an expert are both lost when every holder of it is.
class Overlap {
 public:
  // `holders`: the nodes holding each (layer, expert) of a plan of `experts` experts a layer
  Overlap(const std::map<std::pair<int, int>, std::set<uint32_t>>& holders, const std::vector<uint32_t>& nodes,
          const Plan& plan)
      : words_((plan.layers.size() * plan.experts + 63) / 64) {
    for (size_t i = 0; i < nodes.size(); ++i) index_[nodes[i]] = i;
    bits_.assign(nodes.size() * words_, 0);
    for (const auto& [ex, held_by] : holders) {
      const size_t bit = size_t(ex.first) * plan.experts + size_t(ex.second);
      for (uint32_t n : held_by) bits_[index_[n] * words_ + bit / 64] |= uint64_t(1) << (bit % 64);
    }
    // each node's two closest partners (the fewest experts shared), so that a rank whose own node
    // is one of them still learns the other
    best_.assign(nodes.size(), {});
    for (size_t a = 0; a < nodes.size(); ++a)
      for (size_t b = 0; b < nodes.size(); ++b) {
        if (a == b) continue;
        Partner p{shared_at(a, b), nodes[b]};
        auto& best = best_[a];
        if (p < best[0]) best[1] = best[0], best[0] = p;
        else if (p < best[1]) best[1] = p;
      }
  }
  size_t shared(uint32_t a, uint32_t b) const { return shared_at(index_.at(a), index_.at(b)); }
  // The fewest experts node n shares with a node other than itself and `home` (none: SIZE_MAX).
  size_t closest_partner(uint32_t n, uint32_t home) const {
    const auto& best = best_[index_.at(n)];
    return best[0].node != home ? best[0].shared : best[1].shared;
  }

 private:
  struct Partner {
    size_t shared = SIZE_MAX;
    uint32_t node = UINT32_MAX;
    bool operator<(const Partner& o) const { return std::tie(shared, node) < std::tie(o.shared, o.node); }
  };
  size_t shared_at(size_t a, size_t b) const {
    size_t c = 0;
    for (size_t w = 0; w < words_; ++w) c += size_t(std::popcount(bits_[a * words_ + w] & bits_[b * words_ + w]));
    return c;
  }
  size_t words_;
  std::map<uint32_t, size_t> index_;
  std::vector<uint64_t> bits_;
  std::vector<std::array<Partner, 2>> best_;
};

}  // namespace

std::vector<std::vector<uint32_t>> snapshot_peers(const Plan& plan, const std::vector<uint32_t>& node_of_rank,
                                                  uint32_t copies, const std::map<uint32_t, std::string>& rack_of,
                                                  const std::vector<uint32_t>& lost) {
  auto up = [&](size_t rank) { return !std::binary_search(lost.begin(), lost.end(), uint32_t(rank)); };
  auto same_rack = [&](uint32_t a, uint32_t b) {
    auto ra = rack_of.find(a), rb = rack_of.find(b);
    return a == b || (ra != rack_of.end() && rb != rack_of.end() && ra->second == rb->second);
  };
  std::vector<uint32_t> nodes;
  for (size_t rank = 0; rank < node_of_rank.size(); ++rank)
    if (up(rank)) nodes.push_back(node_of_rank[rank]);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  // the nodes holding each expert
  std::map<std::pair<int, int>, std::set<uint32_t>> holders;
  for (size_t l = 0; l < plan.layers.size(); ++l)
    for (size_t pos = 0; pos < plan.layers[l].placement.size() && pos < node_of_rank.size(); ++pos)
      if (up(pos))
        for (ExpertId e : plan.layers[l].placement[pos]) holders[{int(l), int(e)}].insert(node_of_rank[pos]);
  const Overlap overlap(holders, nodes, plan);
  // the experts node n holds that a copy picked so far holds too, counted per copy
  auto sharing = [&](uint32_t n, const std::vector<uint32_t>& picked) {
    size_t shared = 0;
    for (uint32_t m : picked) shared += overlap.shared(n, m);
    return shared;
  };
  std::map<uint32_t, size_t> chosen;  // how many ranks each node holds slices for
  // a node past this many ranks' copies (two more than an even share) is taken only when no other
  // will do: the copies stay spread
  size_t writers = 0;
  for (size_t rank = 0; rank < node_of_rank.size(); ++rank) writers += up(rank) ? 1 : 0;
  const size_t cap = nodes.empty() ? 0 : (writers * copies + nodes.size() - 1) / nodes.size() + 2;
  std::vector<std::vector<uint32_t>> out(node_of_rank.size());
  for (uint32_t rank = 0; rank < node_of_rank.size(); ++rank) {
    if (!up(rank)) continue;
    std::set<uint32_t> writes_with, holds_with;  // the nodes holding an expert the rank writes, holds
    for (const auto& ex : experts_written(plan, rank, lost))
      for (uint32_t n : holders[ex]) writes_with.insert(n);
    for (size_t l = 0; l < plan.layers.size(); ++l)
      for (ExpertId e : rank < plan.layers[l].placement.size() ? plan.layers[l].placement[rank] : std::vector<ExpertId>{})
        for (uint32_t n : holders[{int(l), int(e)}]) holds_with.insert(n);
    const uint32_t home = node_of_rank[rank];
    std::vector<uint32_t> others;  // every other node, in order
    for (uint32_t n : nodes)
      if (n != home) others.push_back(n);
    // Each copy in turn: the node in the rack holding the fewest copies yet (racks named: the copies
    // span the racks), then away from the writer's rack, then one under the cap of copies a node
    // holds, then sharing the fewest experts with the copies picked — and, while more copies are to
    // come, with its closest partner — (losing every holder of an expert must not take two copies),
    // then of the kind whose turn it is (apart — holding none of the experts it holds, else none it
    // writes — first, then beside — holding some it writes, else some it holds — alternating), then
    // the fewest chosen.
    std::vector<uint32_t> picked;
    while (picked.size() < copies && picked.size() < others.size()) {
      const bool apart_turn = picked.size() % 2 == 0;
      auto key = [&](uint32_t n) {
        auto copies_there = std::count_if(picked.begin(), picked.end(), [&](uint32_t m) { return same_rack(n, m); });
        const bool writes = writes_with.count(n) != 0, holds = holds_with.count(n) != 0;
        auto off_turn = apart_turn ? std::pair(holds, writes) : std::pair(!writes, !holds);
        const size_t ahead = picked.size() + 1 < copies ? overlap.closest_partner(n, home) : 0;
        return std::tuple(copies_there, same_rack(n, home), chosen[n] >= cap, sharing(n, picked), ahead, off_turn,
                          chosen[n]);
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
