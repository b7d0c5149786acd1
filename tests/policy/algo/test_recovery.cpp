// test_recovery.cpp — recovery probability of a placement under k random node failures: hand-worked
// cases, agreement of closed form, enumeration, brute force and Monte Carlo, accuracy at N = 1024
// against exact integer arithmetic, the curve, and errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "policy/algo/recovery.h"
#include "policy/algo/recovery_count.h"
#include "policy/algo/rng.h"

using namespace sal::algo;

namespace {

using Sets = std::vector<std::vector<int>>;

// A layer where expert e occupies one slot on each node of sets[e].
LayerPlacement layer_of(int nodes, const Sets& sets) {
  LayerPlacement l{int(sets.size()), std::vector<std::vector<int>>(size_t(nodes))};
  for (size_t e = 0; e < sets.size(); ++e)
    for (int n : sets[e]) l.nodes[n].push_back(int(e));
  return l;
}

RecoveryOptions forced(MethodChoice m) {
  RecoveryOptions o;
  o.method = m;
  return o;
}

double p_of(const LayerPlacement& l, int k, const RecoveryOptions& o = {}) {
  auto r = recovery_probability(l, k, o);
  REQUIRE(r.ok());
  return r->p;
}

// Brute force over every k-subset (N ≤ 20): the definition itself.
double brute_force(int nodes, const Sets& sets, int k) {
  std::vector<uint32_t> masks;
  for (const auto& s : sets) {
    uint32_t m = 0;
    for (int n : s) m |= 1u << n;
    masks.push_back(m);
  }
  uint64_t total = 0, alive = 0;
  for (uint32_t f = 0; f < (1u << nodes); ++f) {
    if (std::popcount(f) != k) continue;
    ++total;
    bool ok = true;
    for (uint32_t m : masks) ok = ok && (m & ~f) != 0;
    alive += ok;
  }
  return double(alive) / double(total);
}

// Disjoint node blocks, each hosting 1-3 experts, some experts with extra nodes (supersets, as
// MRO's nested node sets): minimal sets are the blocks, so the closed form applies.
Sets nested_instance(Rng& rng, int nodes) {
  Sets sets;
  int next = 0;
  while (next < nodes) {
    const int size = 1 + int(rng.below(3));
    std::vector<int> block;
    for (int i = 0; i < size && next < nodes; ++i) block.push_back(next++);
    const int experts = 1 + int(rng.below(3));
    for (int e = 0; e < experts; ++e) {
      auto s = block;
      if (e > 0 && rng.below(2)) {
        const int extra = int(rng.below(uint64_t(nodes)));
        if (std::find(s.begin(), s.end(), extra) == s.end()) s.push_back(extra);
      }
      sets.push_back(s);
    }
  }
  return sets;
}

// Random overlapping sets of 1-4 nodes (at most `nodes`).
Sets overlapping_instance(Rng& rng, int nodes, int experts) {
  Sets sets(static_cast<size_t>(experts));
  for (auto& s : sets) {
    const int size = 1 + int(rng.below(uint64_t(std::min(4, nodes))));
    while (int(s.size()) < size) {
      const int n = int(rng.below(uint64_t(nodes)));
      if (std::find(s.begin(), s.end(), n) == s.end()) s.push_back(n);
    }
  }
  return sets;
}

using u128 = unsigned __int128;

u128 exact_binomial(int n, int k) {
  if (k < 0 || k > n) return 0;
  u128 c = 1;
  for (int i = 1; i <= k; ++i) c = c * u128(n - k + i) / u128(i);
  return c;
}

// Survivors for disjoint blocks, in exact integers: [x^k] Π_i Σ_{j<s_i} C(s_i,j) x^j (1+x)^free.
u128 exact_survivors(int nodes, const std::vector<int>& block_sizes, int k) {
  std::vector<u128> poly{1};
  int covered = 0;
  for (int s : block_sizes) {
    covered += s;
    std::vector<u128> next(std::min<size_t>(poly.size() + size_t(s) - 1, size_t(k) + 1), 0);
    for (size_t i = 0; i < poly.size(); ++i)
      for (int j = 0; j < s && i + size_t(j) < next.size(); ++j)
        next[i + j] += poly[i] * exact_binomial(s, j);
    poly = next;
  }
  u128 total = 0;
  for (int j = 0; j <= k && j < int(poly.size()); ++j)
    total += poly[j] * exact_binomial(nodes - covered, k - j);
  return total;
}

}  // namespace

TEST_CASE("two experts on disjoint node pairs: hand-counted probabilities") {
  // N = 4, expert 0 on {0,1}, expert 1 on {2,3}. Of the 6 pairs of failed nodes, {0,1} and {2,3}
  // lose an expert: P(2) = 4/6. Every 3 failed nodes contain one of the pairs: P(3) = 0.
  const auto l = layer_of(4, {{0, 1}, {2, 3}});
  CHECK(p_of(l, 0) == 1.0);
  CHECK(p_of(l, 1) == 1.0);
  CHECK(p_of(l, 2) == doctest::Approx(4.0 / 6).epsilon(1e-15));
  CHECK(p_of(l, 3) == 0.0);
  CHECK(p_of(l, 4) == 0.0);
  auto r = recovery_probability(l, 2);
  REQUIRE(r.ok());
  CHECK(r->method == RecoveryMethod::closed_form);
  CHECK(r->lo == r->p);
  CHECK(r->hi == r->p);
}

TEST_CASE("overlapping node sets are counted exactly") {
  // N = 3, expert 0 on {0,1}, expert 1 on {1,2}: of the pairs, only {0,2} spares both: P(2) = 1/3.
  const auto l = layer_of(3, {{0, 1}, {1, 2}});
  auto r = recovery_probability(l, 2);
  REQUIRE(r.ok());
  CHECK(r->method == RecoveryMethod::exact);
  CHECK(r->p == doctest::Approx(1.0 / 3).epsilon(1e-15));
}

TEST_CASE("supersets and repeated slots do not change the answer") {
  // Expert 1's set contains expert 0's: only {0,1} matters. N = 4: P(2) = 5/6, closed form.
  auto l = layer_of(4, {{0, 1}, {0, 1, 2}});
  l.nodes[0].push_back(0);  // expert 0 in two slots of node 0
  auto r = recovery_probability(l, 2);
  REQUIRE(r.ok());
  CHECK(r->method == RecoveryMethod::closed_form);
  CHECK(r->p == doctest::Approx(5.0 / 6).epsilon(1e-15));
}

TEST_CASE("trivial cases: unreplicated expert, no failures, every node failed") {
  LayerPlacement missing{3, {{0}, {1}, {0, 1}}};  // expert 2 appears nowhere
  auto r = recovery_probability(missing, 0);
  REQUIRE(r.ok());
  CHECK(r->p == 0.0);
  CHECK(r->method == RecoveryMethod::exact);
  const auto l = layer_of(5, {{0, 1, 2}, {3, 4}});
  CHECK(p_of(l, 0) == 1.0);
  CHECK(p_of(l, 1) == 1.0);  // no set of one node: nothing can be lost
  CHECK(p_of(l, 5) == 0.0);
  CHECK(p_of(l, 9) == 0.0);
  LayerPlacement empty{0, {{}, {}}};
  CHECK(p_of(empty, 2) == 1.0);
}

TEST_CASE("joint probability: the same failures must spare every layer") {
  const auto a = layer_of(4, {{0, 1}, {2, 3}});
  const auto b = layer_of(4, {{0, 2}, {1, 3}});
  auto report = recovery_report({a, b}, 2);
  REQUIRE(report.ok());
  CHECK(report->layers[0].p == doctest::Approx(4.0 / 6));
  CHECK(report->layers[1].p == doctest::Approx(4.0 / 6));
  // Lost pairs: {0,1},{2,3} for a and {0,2},{1,3} for b; 2 of 6 pairs survive.
  CHECK(report->joint.p == doctest::Approx(2.0 / 6).epsilon(1e-15));
  CHECK(report->joint.method == RecoveryMethod::exact);  // the two layers' pairs overlap
}

TEST_CASE("closed form, enumeration and brute force agree on nested placements") {
  Rng rng(17);
  for (int trial = 0; trial < 40; ++trial) {
    const int nodes = 4 + int(rng.below(11));
    const Sets sets = nested_instance(rng, nodes);
    const auto l = layer_of(nodes, sets);
    for (int k = 0; k <= nodes; ++k) {
      auto closed = recovery_probability(l, k, forced(MethodChoice::closed_form));
      auto exact = recovery_probability(l, k, forced(MethodChoice::exact));
      REQUIRE(closed.ok());
      REQUIRE(exact.ok());
      const double truth = brute_force(nodes, sets, k);
      CHECK(closed->p == doctest::Approx(truth).epsilon(1e-13));
      CHECK(exact->p == doctest::Approx(truth).epsilon(1e-13));
    }
  }
}

// Many experts on 1-3 random nodes: dense graphs of critical pairs (paths, triangles) and triples.
TEST_CASE("the k <= 3 count agrees with brute force on dense overlapping pairs and triples") {
  Rng rng(29);
  for (int trial = 0; trial < 60; ++trial) {
    const int nodes = 3 + int(rng.below(12));
    Sets sets(size_t(4 + rng.below(30)));
    for (auto& s : sets) {
      const int size = 1 + int(rng.below(3)) + (rng.below(6) == 0 ? 0 : 1);  // few singletons
      while (int(s.size()) < std::min(size, nodes)) {
        const int n = int(rng.below(uint64_t(nodes)));
        if (std::find(s.begin(), s.end(), n) == s.end()) s.push_back(n);
      }
    }
    const auto l = layer_of(nodes, sets);
    for (int k = 1; k <= 3; ++k) {
      auto r = recovery_probability(l, k, forced(MethodChoice::exact));
      REQUIRE(r.ok());
      CHECK(r->p == doctest::Approx(brute_force(nodes, sets, k)).epsilon(1e-13));
    }
  }
}

TEST_CASE("the k <= 3 count agrees with enumeration at 1024 nodes") {
  const int nodes = 1024;
  std::vector<sal::algo::detail::NodeSet> pairs;  // a ring of pairs with chords: paths and triangles
  for (int n = 0; n < 200; ++n) pairs.push_back({n, n + 1});
  for (int n = 0; n < 198; n += 3) pairs.push_back({n, n + 2});
  for (int k = 2; k <= 3; ++k) {
    const auto counted = sal::algo::detail::small_survival(nodes, pairs, k);
    const auto visited = sal::algo::detail::enumerate_survival(nodes, pairs, k);
    CHECK(double(counted) == doctest::Approx(double(visited.p)).epsilon(1e-15));
  }
}

TEST_CASE("enumeration agrees with brute force on overlapping placements") {
  Rng rng(23);
  for (int trial = 0; trial < 40; ++trial) {
    const int nodes = 3 + int(rng.below(12));
    const Sets sets = overlapping_instance(rng, nodes, 1 + int(rng.below(8)));
    const auto l = layer_of(nodes, sets);
    for (int k = 0; k <= nodes; ++k) {
      auto r = recovery_probability(l, k);
      REQUIRE(r.ok());
      CHECK(r->method != RecoveryMethod::monte_carlo);
      CHECK(r->p == doctest::Approx(brute_force(nodes, sets, k)).epsilon(1e-13));
    }
  }
}

TEST_CASE("Monte Carlo intervals hold the exact answer") {
  Rng rng(29);
  int inside = 0, cases = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const int nodes = 6 + int(rng.below(9));
    const Sets sets = trial % 2 ? nested_instance(rng, nodes) : overlapping_instance(rng, nodes, 6);
    const auto l = layer_of(nodes, sets);
    const int k = 2 + int(rng.below(uint64_t(nodes - 3)));
    RecoveryOptions o = forced(MethodChoice::monte_carlo);
    o.samples = 20'000;
    o.seed = uint64_t(trial) + 1;
    auto mc = recovery_probability(l, k, o);
    REQUIRE(mc.ok());
    CHECK(mc->method == RecoveryMethod::monte_carlo);
    CHECK(mc->count == 20'000);
    const double truth = brute_force(nodes, sets, k);
    if (truth == 0.0 || truth == 1.0) continue;  // MC of a certainty is trivially exact
    ++cases;
    inside += mc->lo <= truth && truth <= mc->hi;
    CHECK(std::fabs(mc->p - truth) < 4.5 * std::sqrt(truth * (1 - truth) / 20'000));
  }
  REQUIRE(cases >= 15);
  CHECK(inside >= cases * 85 / 100);  // a 95 % interval may miss now and then
}

TEST_CASE("automatic choice falls back to Monte Carlo above the enumeration limit") {
  Rng rng(31);
  const auto l = layer_of(60, overlapping_instance(rng, 60, 80));
  RecoveryOptions o;
  o.enumeration_limit = 1000;
  o.samples = 5000;
  auto r = recovery_probability(l, 8, o);
  REQUIRE(r.ok());
  CHECK(r->method == RecoveryMethod::monte_carlo);
  CHECK(r->lo <= r->p);
  CHECK(r->p <= r->hi);
  o.method = MethodChoice::exact;
  auto refused = recovery_probability(l, 8, o);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("above the limit of 1000") != std::string::npos);
  // The same seed gives the same estimate; another seed another one.
  o.method = MethodChoice::monte_carlo;
  const double first = p_of(l, 8, o);
  CHECK(p_of(l, 8, o) == first);
  o.seed = 2;
  CHECK(p_of(l, 8, o) != first);
}

TEST_CASE("closed form is accurate to 1e-12 at 1024 nodes against exact integer counts") {
  // 150 disjoint blocks of 2-4 nodes (MRO-like) in 1024 nodes; k ≤ 12 keeps C(1024, k) in 128 bits.
  Rng rng(37);
  Sets sets;
  std::vector<int> sizes;
  int next = 0;
  for (int b = 0; b < 150; ++b) {
    const int s = 2 + int(rng.below(3));
    sizes.push_back(s);
    std::vector<int> block;
    for (int i = 0; i < s; ++i) block.push_back(next++);
    sets.push_back(block);
  }
  const auto l = layer_of(1024, sets);
  for (int k = 1; k <= 12; ++k) {
    auto r = recovery_probability(l, k);
    REQUIRE(r.ok());
    CHECK(r->method == (k < 2 ? RecoveryMethod::exact : RecoveryMethod::closed_form));
    const long double truth =
        (long double)exact_survivors(1024, sizes, k) / (long double)exact_binomial(1024, k);
    CHECK(std::fabs((long double)r->p - truth) <= 1e-12L * truth);
  }
}

TEST_CASE("closed form keeps its accuracy where binomials approach 1e300") {
  // 512 disjoint pairs cover all 1024 nodes: P(k) = C(512, k) 2^k / C(1024, k), checked in logs.
  Sets pairs;
  for (int i = 0; i < 512; ++i) pairs.push_back({2 * i, 2 * i + 1});
  const auto l = layer_of(1024, pairs);
  for (int k : {2, 50, 200, 400, 512}) {
    const double log_truth = std::lgamma(513.0) - std::lgamma(k + 1.0) - std::lgamma(513.0 - k) +
                             k * std::log(2.0) - (std::lgamma(1025.0) - std::lgamma(k + 1.0) -
                                                  std::lgamma(1025.0 - k));
    auto r = recovery_probability(l, k);
    REQUIRE(r.ok());
    CHECK(std::log(r->p) == doctest::Approx(log_truth).epsilon(1e-11));
  }
  CHECK(p_of(l, 513) == 0.0);  // 513 failed nodes must include a whole pair
}

TEST_CASE("the curve matches single failure counts and switches method where sets overlap") {
  // Minimal sets {0,1}, {2,3} (disjoint) and {1,2,4} (overlaps): closed form up to k = 2 only.
  const auto l = layer_of(7, {{0, 1}, {2, 3}, {1, 2, 4}, {0, 1, 5}});
  auto curve = recovery_curve({l}, 7);
  REQUIRE(curve.ok());
  REQUIRE(curve->size() == 8);
  for (int k = 0; k <= 7; ++k) {
    CHECK((*curve)[k].failures == k);
    CHECK((*curve)[k].p == doctest::Approx(p_of(l, k)).epsilon(1e-15));
    CHECK((*curve)[k].p ==
          doctest::Approx(brute_force(7, {{0, 1}, {2, 3}, {1, 2, 4}}, k)).epsilon(1e-13));
  }
  CHECK((*curve)[2].method == RecoveryMethod::closed_form);
  CHECK((*curve)[3].method == RecoveryMethod::exact);
  auto forced_closed = recovery_curve({l}, 4, forced(MethodChoice::closed_form));
  REQUIRE_FALSE(forced_closed.ok());
  CHECK(forced_closed.error().message().find("pairwise-disjoint") != std::string::npos);
}

TEST_CASE("malformed placements are errors that say where") {
  LayerPlacement bad{2, {{0}, {1, 2}}};
  auto r = recovery_probability(bad, 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == "layer 0 node 1 slot 1: expert 2 outside 0..1");
  const auto a = layer_of(3, {{0, 1}});
  const auto b = layer_of(4, {{0, 1}});
  CHECK_FALSE(joint_recovery_probability({a, b}, 1).ok());
  CHECK_FALSE(joint_recovery_probability({}, 1).ok());
  CHECK_FALSE(recovery_probability(a, -1).ok());
  CHECK(method_name(RecoveryMethod::closed_form) == "closed-form");
}
