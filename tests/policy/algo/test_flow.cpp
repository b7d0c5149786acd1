// test_flow.cpp — min-cost max-flow: a hand-worked network, assignment problems against brute
// force (with negative costs), maximum flow equal to the matching size, incremental solves, errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "policy/algo/flow.h"
#include "policy/algo/matching.h"
#include "policy/algo/rng.h"

using namespace sal::algo;

namespace {

int edge(MinCostFlow& f, int from, int to, int64_t cap, int64_t cost) {
  auto id = f.add_edge(from, to, cap, cost);
  REQUIRE(id.ok());
  return *id;
}

// Cheapest perfect assignment of an n × n cost matrix by trying every permutation.
int64_t brute_assignment(const std::vector<std::vector<int64_t>>& cost) {
  std::vector<int> perm(cost.size());
  std::iota(perm.begin(), perm.end(), 0);
  int64_t best = INT64_MAX;
  do {
    int64_t c = 0;
    for (size_t i = 0; i < perm.size(); ++i) c += cost[i][perm[i]];
    best = std::min(best, c);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

int64_t flow_assignment(const std::vector<std::vector<int64_t>>& cost) {
  const int n = int(cost.size());
  MinCostFlow f(2 * n + 2);
  const int s = 2 * n, t = 2 * n + 1;
  for (int i = 0; i < n; ++i) {
    edge(f, s, i, 1, 0);
    edge(f, n + i, t, 1, 0);
    for (int j = 0; j < n; ++j) edge(f, i, n + j, 1, cost[i][j]);
  }
  auto r = f.solve(s, t);
  REQUIRE(r.ok());
  CHECK(r->flow == n);
  return r->cost;
}

}  // namespace

TEST_CASE("min-cost flow on a hand-worked network") {
  // s=0, t=3. Two routes: 0-1-3 costs 1+1 per unit (capacity 2), 0-2-3 costs 2+2 (capacity 3);
  // the cross edge 1-2 (cost 1) adds nothing cheaper. Sending 4: 2 units at 2, 2 units at 4 = 12.
  MinCostFlow f(4);
  const int a = edge(f, 0, 1, 2, 1), b = edge(f, 1, 3, 2, 1), c = edge(f, 0, 2, 3, 2);
  const int d = edge(f, 2, 3, 3, 2), x = edge(f, 1, 2, 1, 1);
  auto r = f.solve(0, 3, 4);
  REQUIRE(r.ok());
  CHECK(r->flow == 4);
  CHECK(r->cost == 12);
  CHECK(f.flow_on(a) == 2);
  CHECK(f.flow_on(b) == 2);
  CHECK(f.flow_on(c) == 2);
  CHECK(f.flow_on(d) == 2);
  CHECK(f.flow_on(x) == 0);
  // One more unit is possible (route 0-2-3 has capacity 3): unlimited sends it.
  auto rest = f.solve(0, 3);
  REQUIRE(rest.ok());
  CHECK(rest->flow == 1);
  CHECK(rest->cost == 4);
}

TEST_CASE("min-cost flow solves assignment problems as brute force does, negative costs too") {
  Rng rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + int(rng.below(6));
    std::vector<std::vector<int64_t>> cost(n, std::vector<int64_t>(n));
    for (auto& row : cost)
      for (auto& c : row) c = int64_t(rng.below(41)) - (trial % 2 ? 20 : 0);
    CHECK(flow_assignment(cost) == brute_assignment(cost));
  }
}

TEST_CASE("maximum flow of a unit bipartite network equals the maximum matching") {
  Rng rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int nl = 1 + int(rng.below(30)), nr = 1 + int(rng.below(30));
    std::vector<std::vector<int>> adj(nl);
    MinCostFlow f(nl + nr + 2);
    const int s = nl + nr, t = s + 1;
    for (int u = 0; u < nl; ++u) {
      edge(f, s, u, 1, 0);
      for (int i = 0; i < 2; ++i) {
        const int v = int(rng.below(uint64_t(nr)));
        adj[u].push_back(v);
        edge(f, u, nl + v, 1, 0);
      }
    }
    for (int v = 0; v < nr; ++v) edge(f, nl + v, t, 1, 0);
    auto r = f.solve(s, t);
    REQUIRE(r.ok());
    CHECK(r->flow == hopcroft_karp(nl, nr, adj).size);
  }
}

TEST_CASE("solving in steps gives the same total as one solve") {
  Rng rng(9);
  std::vector<std::vector<int64_t>> cost(5, std::vector<int64_t>(5));
  for (auto& row : cost)
    for (auto& c : row) c = int64_t(rng.below(30));
  MinCostFlow f(12);
  for (int i = 0; i < 5; ++i) {
    edge(f, 10, i, 1, 0);
    edge(f, 5 + i, 11, 1, 0);
    for (int j = 0; j < 5; ++j) edge(f, i, 5 + j, 1, cost[i][j]);
  }
  int64_t total = 0, sent = 0;
  for (int step = 0; step < 5; ++step) {
    auto r = f.solve(10, 11, 1);
    REQUIRE(r.ok());
    total += r->cost;
    sent += r->flow;
  }
  CHECK(sent == 5);
  CHECK(total == brute_assignment(cost));
}

TEST_CASE("a negative-cost cycle and bad arguments are errors") {
  MinCostFlow f(3);
  edge(f, 0, 1, 1, -5);
  edge(f, 1, 0, 1, 2);
  edge(f, 1, 2, 1, 0);
  auto r = f.solve(0, 2);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("negative-cost cycle") != std::string::npos);

  MinCostFlow g(2);
  CHECK_FALSE(g.add_edge(0, 2, 1, 0).ok());
  CHECK_FALSE(g.add_edge(0, 1, -1, 0).ok());
  CHECK_FALSE(g.solve(0, 0).ok());
  CHECK_FALSE(g.solve(0, 5).ok());
  auto nothing = g.solve(0, 1);
  REQUIRE(nothing.ok());
  CHECK(nothing->flow == 0);
}
