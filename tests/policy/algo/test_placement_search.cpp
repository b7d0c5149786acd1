// test_placement_search.cpp — the exact failure counts behind mro's repair step, and the bounded
// search: counts agree with brute force and with recovery_probability; the order is lexicographic
// (fewest failures first); the search keeps slots and replica counts, repairs an invalid start,
// honours `ignore`, is deterministic for a seed, and refuses what it cannot score.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "policy/algo/placement_search.h"
#include "policy/algo/recovery.h"
#include "policy/algo/rng.h"
#include "policy/algo/layers.h"

using namespace sal::algo;
using namespace sal::algo::test;

namespace {

// Brute force: every subset of the nodes, every expert (the definition itself).
FailureCounts brute_force(const LayerPlacement& l, const std::vector<bool>& ignore = {}) {
  const int n = int(l.nodes.size());
  std::vector<uint32_t> mask(size_t(l.experts), 0);
  for (int node = 0; node < n; ++node)
    for (int e : l.nodes[size_t(node)]) mask[size_t(e)] |= 1u << node;
  FailureCounts out(size_t(n) + 1, 0);
  for (uint32_t f = 0; f < (1u << n); ++f)
    for (int e = 0; e < l.experts; ++e)
      if (!(size_t(e) < ignore.size() && ignore[size_t(e)]) && (mask[size_t(e)] & ~f) == 0) {
        ++out[size_t(std::popcount(f))];
        break;
      }
  return out;
}

double binomial(int n, int k) {
  double b = 1;
  for (int i = 1; i <= k; ++i) b = b * (n - k + i) / i;
  return b;
}

}  // namespace

TEST_CASE("failure counts equal brute force, with and without ignored experts") {
  Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int nodes = 1 + int(rng.below(12)), slots = 1 + int(rng.below(4));
    const int experts = 1 + int(rng.below(uint64_t(nodes * slots)));
    auto l = random_layer(rng, nodes, slots, experts);
    std::vector<bool> ignore(static_cast<size_t>(experts));
    for (auto&& x : ignore) x = rng.below(3) == 0;
    CHECK(*failure_counts(l) == brute_force(l));
    CHECK(*failure_counts(l, ignore) == brute_force(l, ignore));
  }
}

TEST_CASE("failure counts give the exact recovery probability") {
  Rng rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int nodes = 2 + int(rng.below(11)), slots = 1 + int(rng.below(4));
    auto l = random_layer(rng, nodes, slots, 1 + int(rng.below(uint64_t(nodes * slots))));
    auto killed = *failure_counts(l);
    for (int k = 0; k < nodes; ++k) {
      auto r = recovery_probability(l, k);
      REQUIRE(r.ok());
      REQUIRE(r->method != RecoveryMethod::monte_carlo);
      CHECK(r->p == doctest::Approx(1.0 - double(killed[size_t(k)]) / binomial(nodes, k)).epsilon(1e-12));
    }
  }
}

TEST_CASE("an expert on no node is lost under every failure set, unless ignored") {
  LayerPlacement l{3, {{0, 1}, {0, 1}}};  // expert 2 has no replica
  CHECK(*failure_counts(l) == FailureCounts{1, 2, 1});
  CHECK(*failure_counts(l, {false, false, true}) == FailureCounts{0, 0, 1});
}

TEST_CASE("the order is lexicographic: fewest failures first") {
  CHECK(compare_failure_counts({0, 0, 1, 9}, {0, 0, 2, 3}) < 0);
  CHECK(compare_failure_counts({0, 1, 0, 0}, {0, 0, 9, 9}) > 0);
  CHECK(compare_failure_counts({0, 1, 4}, {0, 1, 4}) == 0);
  // Two disjoint pairs against two overlapping pairs on 5 nodes: same at k = 2, overlap wins at k = 3.
  LayerPlacement disjoint{2, {{0}, {0}, {1}, {1}, {}}};
  LayerPlacement overlap{2, {{0}, {0, 1}, {1}, {}, {}}};
  auto a = *failure_counts(disjoint), b = *failure_counts(overlap);
  CHECK(a[2] == b[2]);
  CHECK(a[3] == 6);
  CHECK(b[3] == 5);
  CHECK(compare_failure_counts(b, a) < 0);
}

TEST_CASE("the search keeps slots and replica counts, never gets worse, and is deterministic") {
  Rng rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int nodes = 2 + int(rng.below(9)), slots = 1 + int(rng.below(4));
    auto start = random_layer(rng, nodes, slots, 1 + int(rng.below(uint64_t(nodes * slots))));
    PlacementSearchOptions o;
    o.floor = 1 + int(rng.below(3));
    o.max_evaluations = 400;
    auto r = search_placement(start, o);
    REQUIRE(r.ok());
    CHECK(replica_counts(r->layer) == replica_counts(start));
    for (int n = 0; n < nodes; ++n) CHECK(r->layer.nodes[size_t(n)].size() == size_t(slots));
    CHECK(r->killed == *failure_counts(r->layer));
    if (r->valid) CHECK(compare_failure_counts(r->killed, *failure_counts(start)) <= 0);
    auto again = search_placement(start, o);
    CHECK(again->layer.nodes == r->layer.nodes);
  }
}

TEST_CASE("the search repairs an invalid start: 4 experts x 3 replicas on 4 nodes x 3 slots") {
  // Three experts share nodes 0-2; the fourth sits three times on node 3 (one failure loses it).
  LayerPlacement start{4, {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {3, 3, 3}}};
  CHECK((*failure_counts(start))[1] == 1);
  PlacementSearchOptions o;
  o.floor = 2;
  auto r = search_placement(start, o);
  REQUIRE(r.ok());
  CHECK(r->valid);
  CHECK(r->improved);
  // The best: four distinct 3-node sets, so no two failures lose an expert.
  CHECK(r->killed == FailureCounts{0, 0, 0, 4, 1});
  for (int e = 0; e < 4; ++e) CHECK(span(r->layer, e) == 3);
}

TEST_CASE("ignored experts are carried but neither scored nor held to the floor") {
  // Expert 2 fills slots (its other replicas are elsewhere); experts 0 and 1 must spread.
  LayerPlacement start{3, {{0, 0}, {1, 1}, {2, 2}}};
  PlacementSearchOptions o;
  o.floor = 2;
  o.ignore = {false, false, true};
  auto r = search_placement(start, o);
  REQUIRE(r.ok());
  CHECK(r->valid);
  CHECK(span(r->layer, 0) >= 2);
  CHECK(span(r->layer, 1) >= 2);
  CHECK(r->killed == *failure_counts(r->layer, o.ignore));
}

TEST_CASE("the search refuses what it cannot score") {
  LayerPlacement big{1, std::vector<std::vector<int>>(size_t(kMaxSearchNodes + 1), std::vector<int>{0})};
  CHECK_FALSE(search_placement(big).ok());
  CHECK_FALSE(failure_counts(big).ok());
  CHECK_FALSE(failure_counts(LayerPlacement{1, {}}).ok());
  CHECK_FALSE(failure_counts(LayerPlacement{1, {{0, 1}}}).ok());  // expert 1 of 1
  PlacementSearchOptions o;
  o.floor = -1;
  CHECK_FALSE(search_placement(LayerPlacement{1, {{0}}}, o).ok());
}
