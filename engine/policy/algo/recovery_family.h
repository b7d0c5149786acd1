// recovery_family.h — internal to recovery.cpp: reduces placements to the family of node sets that
// decides survival. Each expert of each layer contributes the set of distinct nodes holding it; the
// family keeps only inclusion-minimal sets of at most `max_size` nodes (larger sets cannot be
// contained in a failure set of ≤ max_size nodes, and cannot contain a smaller minimal set's
// subsets — so cutting them first changes no minimality among the rest).
#pragma once

#include <cstddef>
#include <vector>

#include "core/result.h"
#include "policy/algo/recovery.h"

namespace sal::algo::detail {

using NodeSet = std::vector<int>;  // distinct node ids, ascending

struct FailureFamily {
  int nodes = 0;
  int experts = 0;                  // over all layers
  bool unreplicated = false;        // some expert has no replica at all: nothing survives
  std::vector<NodeSet> minimal;     // minimal sets of ≤ max_size nodes, by size then lexicographic
  size_t disjoint_prefix = 0;       // minimal[0..disjoint_prefix) are pairwise disjoint

  // Minimal sets of at most k nodes: a prefix of `minimal`.
  size_t count_at_most(int k) const;
  // True when every minimal set of at most k nodes is disjoint from the others of at most k nodes.
  bool disjoint_up_to(int k) const { return count_at_most(k) <= disjoint_prefix; }
};

// Validates the layers (same node count, expert ids in range) and builds their family.
Result<FailureFamily> build_family(const std::vector<LayerPlacement>& layers, int max_size);

}  // namespace sal::algo::detail
