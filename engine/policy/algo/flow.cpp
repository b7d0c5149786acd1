// flow.cpp — see flow.h.
//
// Potentials: after a Dijkstra run stopped at t, every node's potential grows by min(dist,
// dist[t]). For settled nodes this is the exact distance; unsettled and unreachable nodes all get
// dist[t], which keeps every residual arc's reduced cost non-negative and lets Dijkstra stop early.
#include "policy/algo/flow.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>
#include <utility>

#include "core/deadline.h"

namespace sal::algo {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;  // leaves room for sums
constexpr int kNone = -1;

}  // namespace

MinCostFlow::MinCostFlow(int nodes) : out_(size_t(std::max(nodes, 0))) {}

Result<int> MinCostFlow::add_edge(int from, int to, int64_t capacity, int64_t cost) {
  if (from < 0 || from >= nodes() || to < 0 || to >= nodes())
    return fail("edge ", from, " -> ", to, ": endpoint outside 0..", nodes() - 1);
  if (capacity < 0) return fail("edge ", from, " -> ", to, ": negative capacity ", capacity);
  const int id = edges();
  out_[from].push_back(int(arcs_.size()));
  arcs_.push_back({to, capacity, cost});
  out_[to].push_back(int(arcs_.size()));
  arcs_.push_back({from, 0, -cost});
  capacity_.push_back(capacity);
  potentials_valid_ = false;
  return id;
}

int64_t MinCostFlow::flow_on(int id) const {
  if (id < 0 || id >= edges()) throw std::out_of_range("MinCostFlow::flow_on: no such edge");
  return capacity_[id] - arcs_[2 * size_t(id)].residual;
}

// Bellman–Ford from a virtual source joined to every node at cost 0 (queue-based). A node
// relaxed `nodes()` times lies on a negative cycle.
Status MinCostFlow::ensure_potentials() {
  if (potentials_valid_) return ok_status();
  const size_t n = out_.size();
  potential_.assign(n, 0);
  const bool negative = std::any_of(arcs_.begin(), arcs_.end(),
                                    [](const Arc& a) { return a.residual > 0 && a.cost < 0; });
  if (negative) {
    std::vector<int> relaxed(n, 0);
    std::vector<char> queued(n, 1);
    std::queue<int> q;
    for (size_t v = 0; v < n; ++v) q.push(int(v));
    while (!q.empty()) {
      const int u = q.front();
      q.pop();
      queued[u] = 0;
      for (int a : out_[u]) {
        const Arc& arc = arcs_[a];
        if (arc.residual <= 0 || potential_[u] + arc.cost >= potential_[arc.to]) continue;
        potential_[arc.to] = potential_[u] + arc.cost;
        if (++relaxed[arc.to] > int(n)) return fail("negative-cost cycle through node ", arc.to);
        if (!queued[arc.to]) {
          queued[arc.to] = 1;
          q.push(arc.to);
        }
      }
    }
  }
  potentials_valid_ = true;
  return ok_status();
}

// Dijkstra on reduced costs from s, stopping once t is settled; updates the potentials.
bool MinCostFlow::cheapest_path(int s, int t) {
  using Item = std::pair<int64_t, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  dist_.assign(out_.size(), kInf);
  via_.assign(out_.size(), kNone);
  dist_[s] = 0;
  heap.push({0, s});
  while (!heap.empty()) {
    const auto [d, u] = heap.top();
    heap.pop();
    if (d != dist_[u]) continue;
    if (u == t) break;
    for (int a : out_[u]) {
      const Arc& arc = arcs_[a];
      if (arc.residual <= 0) continue;
      const int64_t nd = d + arc.cost + potential_[u] - potential_[arc.to];
      if (nd < dist_[arc.to]) {
        dist_[arc.to] = nd;
        via_[arc.to] = a;
        heap.push({nd, arc.to});
      }
    }
  }
  if (dist_[t] == kInf) return false;
  for (size_t v = 0; v < out_.size(); ++v) potential_[v] += std::min(dist_[v], dist_[t]);
  return true;
}

int64_t MinCostFlow::bottleneck(int s, int t, int64_t limit) const {
  int64_t amount = limit;
  for (int v = t; v != s; v = arcs_[via_[v] ^ 1].to)
    amount = std::min(amount, arcs_[via_[v]].residual);
  return amount;
}

// Pushes `amount` along the path found last; returns the cost of one unit along it.
int64_t MinCostFlow::push(int s, int t, int64_t amount) {
  int64_t unit_cost = 0;
  for (int v = t; v != s; v = arcs_[via_[v] ^ 1].to) {
    arcs_[via_[v]].residual -= amount;
    arcs_[via_[v] ^ 1].residual += amount;
    unit_cost += arcs_[via_[v]].cost;
  }
  return unit_cost;
}

Result<FlowResult> MinCostFlow::solve(int s, int t, int64_t max_flow) {
  if (s < 0 || s >= nodes() || t < 0 || t >= nodes())
    return fail("source ", s, " or sink ", t, " outside 0..", nodes() - 1);
  if (s == t) return fail("source and sink are both node ", s);
  if (max_flow < 0) return fail("negative flow limit ", max_flow);
  SAL_TRY(ensure_potentials());
  FlowResult r;
  uint64_t rounds = 0;
  while (r.flow < max_flow && cheapest_path(s, t)) {
    if (deadline_passed_every(rounds, 64)) return fail("stopped: the calling budget ran out");
    const int64_t amount = bottleneck(s, t, max_flow - r.flow);
    r.cost += amount * push(s, t, amount);
    r.flow += amount;
  }
  return r;
}

}  // namespace sal::algo
