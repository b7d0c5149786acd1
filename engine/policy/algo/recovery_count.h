// recovery_count.h — internal to recovery.cpp: the ways to count surviving failure sets for a
// family of "critical" node sets (the minimal expert node sets of at most k nodes): a survivor is a
// k-subset of the N nodes that contains none of them. Closed form (disjoint sets), counting by
// inclusion–exclusion (k ≤ 3, any overlap), enumeration, and sampling.
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

// The most failures small_survival counts: singletons, pairs and triples of critical nodes.
constexpr int kSmallFailures = 3;

// Exact survival probability for k ≤ kSmallFailures failures and any overlap between the critical
// sets, which must be distinct and inclusion-minimal (as a FailureFamily's are). The k-subsets
// that contain a critical set are counted directly: those holding a critical singleton, plus, among
// the other nodes, the critical pairs (k = 2), or the triples holding a critical pair — by
// inclusion–exclusion over the graph of critical pairs: Σ_pairs (M − 2) − Σ_v C(deg v, 2) +
// triangles — and the critical triples themselves (k = 3). Work: the sets plus Σ_v deg v², whatever
// N is, where enumeration visits C(u, k) subsets of the u critical nodes.
long double small_survival(int nodes, const std::vector<NodeSet>& critical, int k);

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
