// recovery_count.h — internal to recovery.cpp: the three ways to count surviving failure sets for
// a family of "critical" node sets (the minimal expert node sets of at most k nodes): a survivor is
// a k-subset of the N nodes that contains none of them.
#pragma once

#include <cstdint>
#include <vector>

#include "policy/algo/recovery_family.h"

namespace sal::algo::detail {

// C(n, k) in long double (0 outside 0 <= k <= n); relative error about k · 1e-19.
long double binomial(int n, int k);

// Survival probability for every k = 0..max_k when `blocks` are pairwise disjoint: the closed form
// Π_i Σ_{j<s_i} C(s_i, j) x^j · (1+x)^(N − Σ s_i), coefficient k, over C(N, k). Valid for every k
// below the size of the smallest minimal set left out of `blocks`.
std::vector<long double> closed_form_survival(int nodes, const std::vector<NodeSet>& blocks,
                                              int max_k);

// Subsets an exact count for k failures would visit over a union of `union_size` critical nodes:
// Σ_{j≤k} C(union_size, j), saturating at UINT64_MAX.
uint64_t enumeration_work(int union_size, int k);

struct Counted {
  long double p = 1;
  uint64_t visited = 0;
};

// Exact survival probability for k failures by enumerating subsets of the critical nodes that
// contain no critical set (pruned at the first complete set).
Counted enumerate_survival(int nodes, const std::vector<NodeSet>& critical, int k);

struct Sampled {
  uint64_t survived = 0;
  uint64_t samples = 0;
};

// Monte-Carlo: `samples` uniform k-subsets of the nodes, from a generator seeded with `seed`.
Sampled sample_survival(int nodes, const std::vector<NodeSet>& critical, int k, uint64_t samples,
                        uint64_t seed);

}  // namespace sal::algo::detail
