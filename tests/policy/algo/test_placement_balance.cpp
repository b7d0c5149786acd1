// test_placement_balance.cpp — the balancer behind mro's last step: it never changes the exact
// failure counts (the recovery probability at every k), keeps every node's slots, every expert's
// replica count and span, never makes the work less even, and reaches the best balance the minimal
// node sets allow on a worked example; the imbalance figure; bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "policy/algo/placement_balance.h"
#include "policy/algo/placement_search.h"
#include "policy/algo/recovery.h"
#include "policy/algo/rng.h"
#include "policy/algo/layers.h"

using namespace sal::algo;
using namespace sal::algo::test;

namespace {

BalanceResult balance(const LayerPlacement& l, const std::vector<double>& loads, int floor = 1) {
  auto r = balance_placement(l, loads, {floor, 0});
  INFO((r.ok() ? std::string() : r.error().message()));
  REQUIRE(r.ok());
  return *r;
}

// What every result must satisfy.
void check_invariants(const LayerPlacement& before, const BalanceResult& r, int floor) {
  REQUIRE(r.layer.nodes.size() == before.nodes.size());
  for (size_t n = 0; n < before.nodes.size(); ++n) CHECK(r.layer.nodes[n].size() == before.nodes[n].size());
  CHECK(replica_counts(r.layer) == replica_counts(before));
  const int N = int(before.nodes.size());
  const auto reps = replica_counts(before);
  for (int e = 0; e < before.experts; ++e) {
    const int need = std::min({floor, N, reps[size_t(e)]});
    if (span(before, e) >= need) CHECK(span(r.layer, e) >= need);  // valid stays valid
  }
  CHECK(r.after <= r.before + 1e-12);
  auto a = failure_counts(before), b = failure_counts(r.layer);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);  // the recovery probability at every k, exactly
}

}  // namespace

TEST_CASE("balance: the imbalance is the busiest node's work over the mean, loads split over replicas") {
  // expert 0 (load 4) on nodes 0 and 1, expert 1 (load 2) on node 1, expert 2 (load 0) on node 2
  LayerPlacement l{3, {{0}, {0, 1}, {2}}};
  auto x = placement_imbalance(l, {4, 2, 0});
  REQUIRE(x.ok());
  CHECK(*x == doctest::Approx(4.0 / 2.0));  // node 1 does 2 + 2 = 4 of a total 6 over 3 nodes
  CHECK(*placement_imbalance(l, {0, 0, 0}) == 1.0);
  CHECK_FALSE(placement_imbalance(l, {1, 1}).ok());  // a load for every expert
  CHECK_FALSE(balance_placement(l, {1, -1, 1}).ok());
  CHECK_FALSE(balance_placement(LayerPlacement{1, {}}, {1}).ok());
}

TEST_CASE("balance: mro's blocks of the least replicated experts spread out, same recovery (worked example)") {
  // 8 nodes x 4 slots; experts 0-5 at 2 replicas (load 1 each, 0.5 per replica), 6 and 7 at 10
  // (load 4, 0.4 per replica). mro: the block {0,1,2,3} on nodes 0-1, {4,5,6,7} on nodes 2-3, the
  // hot experts' other replicas on nodes 4-7. Nodes 0-1 do 2.0 against a mean of 1.75 (1.143).
  // Any placement as good for recovery has the six experts on two node pairs; the best of those puts
  // three on each pair with a hot replica (1.9: 1.086).
  LayerPlacement mro{8, {{0, 1, 2, 3}, {0, 1, 2, 3}, {4, 5, 6, 7}, {4, 5, 6, 7},
                         {6, 7, 6, 7}, {6, 7, 6, 7}, {6, 7, 6, 7}, {6, 7, 6, 7}}};
  const std::vector<double> loads{1, 1, 1, 1, 1, 1, 4, 4};
  auto r = balance(mro, loads, 2);
  CHECK(r.before == doctest::Approx(2.0 / 1.75));
  CHECK(r.after == doctest::Approx(1.9 / 1.75));
  check_invariants(mro, r, 2);
  auto p2 = recovery_probability(r.layer, 2);
  REQUIRE(p2.ok());
  CHECK(p2->p == doctest::Approx(1.0 - 2.0 / 28));  // still the counting bound: two pairs of nodes
}

TEST_CASE("balance: random layers keep their failure counts, slots and spans, and never get worse") {
  Rng rng(7);
  int improved = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int nodes = 3 + int(rng.below(8)), slots = 1 + int(rng.below(4));
    const int experts = 1 + int(rng.below(uint64_t(nodes * slots)));
    LayerPlacement l = random_layer(rng, nodes, slots, experts);
    std::vector<double> loads(static_cast<size_t>(experts));
    for (auto& x : loads) x = double(rng.below(100)) * (rng.below(4) == 0 ? 10 : 1);
    const int floor = 1 + int(rng.below(3));
    CAPTURE(trial);
    auto r = balance(l, loads, floor);
    check_invariants(l, r, floor);
    improved += r.after < r.before - 1e-9;
  }
  CHECK(improved > 30);  // most random layers have room
}

TEST_CASE("balance: deterministic, and a balanced layer is left as it is") {
  Rng rng(11);
  LayerPlacement l = random_layer(rng, 9, 3, 10);
  std::vector<double> loads{5, 1, 7, 2, 2, 9, 3, 1, 4, 6};
  auto a = balance(l, loads), b = balance(l, loads);
  CHECK(a.layer.nodes == b.layer.nodes);
  CHECK(a.after == b.after);
  LayerPlacement even{2, {{0, 1}, {0, 1}}};
  auto c = balance(even, {3, 5});
  CHECK(c.layer.nodes == even.nodes);
  CHECK(c.moves == 0);
  CHECK(c.after == 1.0);
}

TEST_CASE("balance: a large layer (1024 nodes x 8 slots, 256 experts) keeps its closed-form recovery") {
  // blocks of 8 experts with 2 replicas on node pairs, then the rest dealt round robin, skewed loads
  const int N = 1024, c = 8, E = 256;
  LayerPlacement l{E, std::vector<std::vector<int>>(size_t(N))};
  std::vector<int> reps(static_cast<size_t>(E), 2);
  int left = N * c - 2 * E;
  for (int e = E - 1; left > 0; e = (e == 0 ? E - 1 : e - 1), --left) ++reps[size_t(e)];
  std::vector<double> loads(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) loads[size_t(e)] = 1000.0 / (1 + (E - 1 - e) * 0.05) * reps[size_t(e)] / 8;
  int node = 0;
  for (int g = 0; g < E / c; ++g, node += 2)  // 32 blocks of 8 experts on 2 nodes each
    for (int e = g * c; e < (g + 1) * c; ++e) l.nodes[size_t(node)].push_back(e), l.nodes[size_t(node) + 1].push_back(e);
  int at = node;
  for (int e = 0; e < E; ++e)
    for (int k = 2; k < reps[size_t(e)]; ++k) {
      while (int(l.nodes[size_t(at)].size()) == c) at = at + 1 == N ? node : at + 1;
      l.nodes[size_t(at)].push_back(e);
      at = at + 1 == N ? node : at + 1;
    }
  auto r = balance(l, loads, 2);
  CHECK(r.after <= r.before);
  CHECK(replica_counts(r.layer) == replica_counts(l));
  for (int k = 1; k <= 3; ++k) {
    auto a = recovery_probability(l, k), b = recovery_probability(r.layer, k);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->p == doctest::Approx(b->p).epsilon(1e-12));
  }
}
