// layers.h — small helpers the placement tests share: a random layer, and each expert's replica
// count and span (distinct nodes).
#pragma once

#include <algorithm>
#include <vector>

#include "policy/algo/recovery.h"
#include "policy/algo/rng.h"

namespace sal::algo::test {

// A random layer: `experts` experts dealt at random into nodes × slots (every expert at least once).
inline LayerPlacement random_layer(Rng& rng, int nodes, int slots, int experts) {
  std::vector<int> all;
  for (int i = 0; i < nodes * slots; ++i) all.push_back(i < experts ? i : int(rng.below(uint64_t(experts))));
  for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[size_t(rng.below(i))]);
  LayerPlacement l{experts, std::vector<std::vector<int>>(static_cast<size_t>(nodes))};
  for (size_t i = 0; i < all.size(); ++i) l.nodes[i / size_t(slots)].push_back(all[i]);
  return l;
}

inline std::vector<int> replica_counts(const LayerPlacement& l) {
  std::vector<int> r(static_cast<size_t>(l.experts), 0);
  for (const auto& node : l.nodes)
    for (int e : node) ++r[size_t(e)];
  return r;
}

inline int span(const LayerPlacement& l, int e) {
  int s = 0;
  for (const auto& node : l.nodes) s += std::find(node.begin(), node.end(), e) != node.end();
  return s;
}

}  // namespace sal::algo::test
