// golomb.h — cyclic (modular) Golomb rulers and SPARe's shard layout built from them.
//
// A cyclic Golomb ruler modulo N with r marks is a set M = {m_0 = 0 < m_1 < … < m_{r-1}} < N whose
// r(r−1) ordered differences m_i − m_j (i ≠ j) are distinct modulo N. SPARe (Lee et al., "Stacked
// Parallelism with Adaptive Reordering") gives each of the N data-parallel groups r data shards:
// group g hosts shard types (g + m_j) mod N, stacked in mark order (round j computes shard type g +
// m_j). Shard types a ≠ b share host g iff a − g and b − g are both marks, i.e. a − b ≡ m_i − m_j;
// with distinct differences that happens for at most one (i, j), so no two shard types share more
// than one host. Every shard type has exactly r hosts: the groups t − m_j.
//
// Such a ruler needs r(r−1) ≤ N − 1 (the differences are distinct non-zero residues). The search is
// a depth-first search over increasing marks with a budget of search nodes; it reports an error
// when the bound rules the ruler out or the budget runs out first.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"

namespace sal::algo {

// Search nodes cyclic_golomb_ruler may visit by default: small enough to give up within about half
// a second. Rulers with r up to SPARe's r* = ⌊log₂ N + 0.833⌋ were found at once for every
// N ≤ 4000 where one exists (all but N = 22, r = 5); near-perfect ones (r(r−1) close to N − 1, e.g.
// Singer's N = 133, r = 12) may exist and still not be found within the budget.
constexpr uint64_t kGolombSearchNodes = 20'000'000;

// Marks of a cyclic Golomb ruler modulo `modulus` with `marks` marks, ascending, first mark 0.
Result<std::vector<int>> cyclic_golomb_ruler(int modulus, int marks,
                                             uint64_t max_search_nodes = kGolombSearchNodes);

// True when the ordered differences of `marks` are distinct modulo `modulus`.
bool is_cyclic_golomb_ruler(int modulus, const std::vector<int>& marks);

struct ShardLayout {
  int groups = 0;                        // N data-parallel groups = N shard types
  int redundancy = 0;                    // r shards per group
  std::vector<int> marks;                // the ruler
  std::vector<std::vector<int>> hosted;  // hosted[g] = shard types of group g, in stack order
};

// SPARe's layout for N groups with redundancy r.
Result<ShardLayout> spare_layout(int groups, int redundancy,
                                 uint64_t max_search_nodes = kGolombSearchNodes);

// hosts[t] = the groups hosting shard type t (ascending).
std::vector<std::vector<int>> hosts_of_types(const ShardLayout& layout);

// The largest number of hosts two distinct shard types share (≤ 1 for a ruler layout).
int max_common_hosts(const ShardLayout& layout);

}  // namespace sal::algo
