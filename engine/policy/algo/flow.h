// flow.h — minimum-cost maximum flow with integer capacities and costs, by successive shortest
// paths: each augmentation follows a cheapest residual path found by Dijkstra on reduced costs
// (costs shifted by node potentials, which keeps them non-negative). Negative edge costs are
// allowed: the first solve sets the potentials by Bellman–Ford and refuses a negative-cost cycle.
// O(F · E log V) for a total flow F. Used by SPARe's reordering controller (fewest shard moves)
// and by policies directly.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/result.h"

namespace sal::algo {

struct FlowResult {
  int64_t flow = 0;  // units sent by this solve
  int64_t cost = 0;  // their total cost (sum over edges of flow × cost)
};

class MinCostFlow {
 public:
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

  explicit MinCostFlow(int nodes);

  int nodes() const { return int(out_.size()); }
  int edges() const { return int(capacity_.size()); }

  // Adds a directed edge; returns its id (0, 1, 2, … in the order added). Errors on an endpoint
  // outside 0..nodes-1 or a negative capacity.
  Result<int> add_edge(int from, int to, int64_t capacity, int64_t cost);

  // Sends up to max_flow units from s to t at the least total cost, on top of whatever earlier
  // solves sent (so flow and cost add up across calls). Errors on a bad s or t, s == t, or a
  // negative-cost cycle in the residual graph. Sums are not checked for int64 overflow.
  Result<FlowResult> solve(int s, int t, int64_t max_flow = kUnlimited);

  // Flow currently on edge `id` (0 <= id < edges(); anything else is a programming error).
  int64_t flow_on(int id) const;

 private:
  struct Arc {
    int to;
    int64_t residual;
    int64_t cost;
  };

  Status ensure_potentials();
  bool cheapest_path(int s, int t);
  int64_t bottleneck(int s, int t, int64_t limit) const;
  int64_t push(int s, int t, int64_t amount);

  std::vector<Arc> arcs_;              // arc 2i is edge i, arc 2i+1 its reverse
  std::vector<std::vector<int>> out_;  // arcs leaving each node
  std::vector<int64_t> capacity_;      // capacity each edge was added with
  std::vector<int64_t> potential_;
  std::vector<int64_t> dist_;
  std::vector<int> via_;               // arc by which the cheapest path reaches each node
  bool potentials_valid_ = false;      // false until set, and again after add_edge
};

}  // namespace sal::algo
