// test_matching.cpp — Hopcroft–Karp: hand-worked graphs, agreement with a simple augmenting-path
// matcher on random graphs, warm starts, and malformed input.
#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>

#include "policy/algo/matching.h"
#include "policy/algo/rng.h"

using namespace sal::algo;

namespace {

using Adj = std::vector<std::vector<int>>;

// Kuhn's algorithm: one augmenting path at a time — slow, obviously right.
struct Kuhn {
  const Adj& adj;
  std::vector<int> partner;
  std::vector<char> seen;
  bool try_left(int u) {
    for (int v : adj[u]) {
      if (seen[v]) continue;
      seen[v] = 1;
      if (partner[v] < 0 || try_left(partner[v])) {
        partner[v] = u;
        return true;
      }
    }
    return false;
  }
  int run(int n_right) {
    partner.assign(size_t(n_right), -1);
    int size = 0;
    for (size_t u = 0; u < adj.size(); ++u) {
      seen.assign(size_t(n_right), 0);
      size += try_left(int(u));
    }
    return size;
  }
};

void check_consistent(const Adj& adj, const MatchingResult& m) {
  int pairs = 0;
  for (size_t u = 0; u < adj.size(); ++u) {
    const int v = m.left_to_right[u];
    if (v == kUnmatched) continue;
    ++pairs;
    CHECK(m.right_to_left[v] == int(u));
    CHECK(std::find(adj[u].begin(), adj[u].end(), v) != adj[u].end());
  }
  CHECK(pairs == m.size);
}

Adj random_graph(Rng& rng, int n_left, int n_right, int degree) {
  Adj adj(static_cast<size_t>(n_left));
  for (auto& row : adj)
    for (int i = 0; i < degree; ++i) row.push_back(int(rng.below(uint64_t(n_right))));
  return adj;
}

}  // namespace

TEST_CASE("Hopcroft-Karp undoes a greedy choice to match everyone") {
  // Greedy would give left 0 the right vertex 0 and strand left 1.
  const Adj adj = {{0, 1}, {0}};
  const auto m = hopcroft_karp(2, 2, adj);
  CHECK(m.size == 2);
  CHECK(m.left_to_right == std::vector<int>{1, 0});
  check_consistent(adj, m);
}

TEST_CASE("Hopcroft-Karp on a graph whose maximum matching is not perfect") {
  // Three left vertices compete for right vertices 0 and 1 only; left 3 is isolated.
  const Adj adj = {{0, 1}, {0}, {1}, {}, {2}};
  const auto m = hopcroft_karp(5, 3, adj);
  CHECK(m.size == 3);
  CHECK(m.left_to_right[3] == kUnmatched);
  check_consistent(adj, m);
}

TEST_CASE("Hopcroft-Karp handles empty graphs") {
  CHECK(hopcroft_karp(0, 0, {}).size == 0);
  const auto m = hopcroft_karp(3, 2, Adj(3));
  CHECK(m.size == 0);
  CHECK(m.right_to_left == std::vector<int>{kUnmatched, kUnmatched});
}

TEST_CASE("Hopcroft-Karp matches as many pairs as Kuhn's algorithm on random graphs") {
  Rng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int nl = 1 + int(rng.below(40)), nr = 1 + int(rng.below(40));
    const Adj adj = random_graph(rng, nl, nr, int(rng.below(4)));
    const auto m = hopcroft_karp(nl, nr, adj);
    Kuhn kuhn{adj, {}, {}};
    CHECK(m.size == kuhn.run(nr));
    check_consistent(adj, m);
  }
}

TEST_CASE("a long augmenting path does not overflow the stack") {
  // A chain: left i may take right i or i+1 and starts matched to i+1; the last left vertex may
  // only take right n-1, so the one augmenting path runs back through all 200000 left vertices.
  const int n = 200'000;
  Adj adj(n);
  std::vector<int> start(n, kUnmatched);
  for (int i = 0; i + 1 < n; ++i) {
    adj[i] = {i, i + 1};
    start[i] = i + 1;
  }
  adj[n - 1] = {n - 1};
  auto m = hopcroft_karp(n, n + 1, adj, start);
  REQUIRE(m.ok());
  CHECK(m->size == n);
}

TEST_CASE("a warm start reaches the same size and keeps a full matching as it is") {
  Rng rng(11);
  const Adj adj = random_graph(rng, 50, 50, 3);
  const auto cold = hopcroft_karp(50, 50, adj);
  std::vector<int> half = cold.left_to_right;
  for (size_t u = 0; u < half.size(); u += 2) half[u] = kUnmatched;
  auto warm = hopcroft_karp(50, 50, adj, half);
  REQUIRE(warm.ok());
  CHECK(warm->size == cold.size);
  auto same = hopcroft_karp(50, 50, adj, cold.left_to_right);
  REQUIRE(same.ok());
  CHECK(same->left_to_right == cold.left_to_right);
}

TEST_CASE("a warm start that is not a matching of the graph is refused") {
  const Adj adj = {{0}, {0, 1}};
  auto not_edge = hopcroft_karp(2, 2, adj, {1, kUnmatched});
  REQUIRE_FALSE(not_edge.ok());
  CHECK(not_edge.error().message().find("not its neighbour") != std::string::npos);
  auto shared = hopcroft_karp(2, 2, adj, {0, 0});
  REQUIRE_FALSE(shared.ok());
  CHECK(shared.error().message().find("two partners") != std::string::npos);
  CHECK_FALSE(hopcroft_karp(2, 2, adj, {0}).ok());
}

TEST_CASE("malformed graphs are reported by check_bipartite and are programming errors for HK") {
  CHECK(check_bipartite(2, 2, {{0}, {1}}).ok());
  auto bad = check_bipartite(2, 2, {{0}, {2}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "left vertex 1 has neighbour 2 outside 0..1");
  CHECK_FALSE(check_bipartite(3, 2, {{0}, {1}}).ok());
  CHECK_THROWS_AS(hopcroft_karp(2, 2, {{0}, {-1}}), std::invalid_argument);
}
