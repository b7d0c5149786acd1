// test_spare.cpp — SPARe: closed forms against hand values and Monte Carlo, and the reordering
// controller's guarantees (minimal depth, valid stacks, fewest moves as brute force, wipe-out).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "policy/algo/rng.h"
#include "policy/algo/spare.h"

using namespace sal::algo;

namespace {

ShardLayout layout_of(int n, int r) {
  auto layout = spare_layout(n, r);
  REQUIRE(layout.ok());
  return *layout;
}

ReorderResult run_reorder(const ShardStacks& s) {
  auto r = reorder(s);
  INFO((r.ok() ? std::string() : r.error().message()));
  REQUIRE(r.ok());
  return *r;
}

int round_of(const std::vector<int>& stack, int t) {
  return int(std::find(stack.begin(), stack.end(), t) - stack.begin());
}

// What every non-wiped result must satisfy, whatever the stacks.
void check_result(const ShardStacks& s, const ReorderResult& r) {
  const int alive = int(std::count(s.alive.begin(), s.alive.end(), true));
  CHECK(r.depth >= *min_depth_bound(s.shard_types, s.shard_types - alive));
  if (r.depth > 1) CHECK_FALSE(*depth_feasible(s, r.depth - 1));  // minimal
  for (size_t g = 0; g < s.stacks.size(); ++g) {  // stacks are permutations of the old ones
    auto a = s.stacks[g], b = r.stacks[g];
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    CHECK(a == b);
  }
  std::vector<int> load(s.stacks.size(), 0);
  for (int t = 0; t < s.shard_types; ++t) {  // every type computed by a survivor within depth
    const int g = r.provider[t];
    REQUIRE(g >= 0);
    CHECK(s.alive[g]);
    CHECK(round_of(r.stacks[g], t) < r.depth);
    ++load[g];
  }
  for (int l : load) CHECK(l <= r.depth);
  if (r.outcome == ReorderOutcome::kept) {
    CHECK(r.moves == 0);
    CHECK(r.stacks == s.stacks);
  }
}

// Fewest promotions at `depth` by trying every provider choice (tiny instances only).
int brute_min_moves(const ShardStacks& s, int depth) {
  std::vector<std::vector<int>> hosts(size_t(s.shard_types));
  for (size_t g = 0; g < s.stacks.size(); ++g)
    if (s.alive[g])
      for (int t : s.stacks[g]) hosts[t].push_back(int(g));
  std::vector<int> choice(size_t(s.shard_types), 0), load(s.stacks.size(), 0);
  int best = INT32_MAX;
  auto search = [&](auto& self, int t, int moves) -> void {
    if (moves >= best) return;
    if (t == s.shard_types) {
      best = moves;
      return;
    }
    for (int g : hosts[t]) {
      if (load[g] == depth) continue;
      ++load[g];
      self(self, t + 1, moves + (round_of(s.stacks[g], t) >= depth));
      --load[g];
    }
  };
  search(search, 0, 0);
  return best;
}

}  // namespace

TEST_CASE("c(k), mu, r* against hand-computed values") {
  CHECK(*min_depth_bound(10, 0) == 1);
  CHECK(*min_depth_bound(10, 5) == 2);
  CHECK(*min_depth_bound(10, 6) == 3);  // 4 survivors for 10 types
  CHECK(*min_depth_bound(10, 9) == 10);
  CHECK_FALSE(min_depth_bound(10, 10).ok());
  // mu(1000, 10) = Γ(0.1)/10 · 1000^0.9 = 9.51351/10 · 501.187
  CHECK(*mean_failures_endured(1000, 10) == doctest::Approx(476.80).epsilon(1e-4));
  CHECK(*mean_failures_endured(200, 2) == doctest::Approx(std::sqrt(M_PI) / 2 * std::sqrt(200.0)));
  CHECK_FALSE(mean_failures_endured(10, 11).ok());
  CHECK_FALSE(mean_failures_endured(10, 0).ok());
  // The paper's r* for its three cluster sizes: floor(log2 N + 0.833) = 8, 10, 10.
  CHECK(*optimal_redundancy(200) == 8);
  CHECK(*optimal_redundancy(600) == 10);
  CHECK(*optimal_redundancy(1000) == 10);
}

TEST_CASE("mean overhead averages c(k) over the failures endured, plus the depth gap") {
  // N = 10, r = 3: mu = Γ(1/3)/3 · 10^(2/3) = 4.14 -> k = 0..3, c = 1, 2, 2, 2.
  CHECK(*mean_overhead(10, 3) == doctest::Approx(7.0 / 4));
  CHECK(*mean_overhead(10, 3, {0, 0.5}) == doctest::Approx(7.5 / 4));
}

TEST_CASE("the checkpoint period maximises the availability model") {
  const double ts = 60, tf = 300, tr = 3600;
  const double tc = *optimal_checkpoint_period(ts, tf, tr);
  CHECK(tc == doctest::Approx(60 + std::sqrt(3600 + 2 * 60 * 3900.0)));
  const double best = *optimal_availability(ts, tf, tr);
  CHECK(best == doctest::Approx(*availability(tc, ts, tf, tr)));
  for (double f : {0.5, 0.9, 0.99, 1.01, 1.1, 2.0}) CHECK(*availability(tc * f, ts, tf, tr) < best);
  CHECK(*availability(1e9, ts, tf, tr) < 1e-3);
  CHECK_FALSE(availability(30, 60, tf, tr).ok());  // a period shorter than a save
  CHECK_FALSE(optimal_checkpoint_period(ts, 0, tr).ok());
  // Time-to-train: masking failures lengthens the time between restarts, so it beats r = 1.
  const double j1 = *time_to_train_factor(600, 1, 300, 60, 3600);
  const double j10 = *time_to_train_factor(600, 10, 300, 60, 3600);
  CHECK(j10 < j1);
}

TEST_CASE("Monte-Carlo failures endured match mu(N, r) within a few percent") {
  for (auto [n, r] : {std::pair{200, 8}, {600, 10}, {1000, 10}}) {
    auto sim = simulate_spare(n, r, {1500, 42, false});
    REQUIRE(sim.ok());
    const double mu = *mean_failures_endured(n, r);
    CAPTURE(n);
    CAPTURE(sim->mean_endured);
    CHECK(std::fabs(sim->mean_endured - mu) <= 0.03 * mu);
    CHECK(sim->stderr_endured < 0.005 * mu);
  }
}

TEST_CASE("simulated depths stay at or above c(k) and near the overhead bound") {
  auto sim = simulate_spare(100, 7, {20, 5, true});
  REQUIRE(sim.ok());
  REQUIRE(!sim->depth_by_failures.empty());
  CHECK(sim->depth_by_failures[0] == 1.0);
  for (size_t k = 0; k < sim->depth_by_failures.size(); ++k)
    CHECK(sim->depth_by_failures[k] >= *min_depth_bound(100, int(k)));
  CHECK(sim->mean_depth == doctest::Approx(*mean_overhead(100, 7)).epsilon(0.05));
  auto again = simulate_spare(100, 7, {20, 5, true});
  REQUIRE(again.ok());
  CHECK(again->mean_depth == sim->mean_depth);
}

TEST_CASE("the incremental depth tracker gives the minimal depth after every failure") {
  Rng rng(29);
  for (auto [n, r] : {std::pair{13, 4}, {57, 5}, {100, 7}}) {
    const auto layout = layout_of(n, r);
    for (int trial = 0; trial < 3; ++trial) {
      SpareDepthTracker tracker(layout);
      ShardStacks s = initial_stacks(layout);
      CHECK(tracker.depth() == 1);
      std::vector<int> order(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) order[size_t(i)] = i;
      for (int i = n - 1; i > 0; --i) std::swap(order[size_t(i)], order[rng.below(uint64_t(i) + 1)]);
      for (int g : order) {
        s.alive[size_t(g)] = false;
        const bool masked = tracker.fail_group(g);
        const bool wiped = !*depth_feasible(s, n);  // a type with no survivor: infeasible at any depth
        CAPTURE(n);
        CHECK(masked == !wiped);
        if (!masked) break;
        CHECK(*depth_feasible(s, tracker.depth()));
        if (tracker.depth() > 1) CHECK_FALSE(*depth_feasible(s, tracker.depth() - 1));
      }
    }
  }
}

TEST_CASE("one failure: the fresh stacks already cover at depth 2, nothing moves") {
  const auto layout = layout_of(7, 3);
  ShardStacks s = initial_stacks(layout);
  auto first = run_reorder(s);
  CHECK(first.outcome == ReorderOutcome::kept);
  CHECK(first.depth == 1);
  s.alive[0] = false;
  auto r = run_reorder(s);
  CHECK(r.outcome == ReorderOutcome::kept);
  CHECK(r.depth == 2);
  check_result(s, r);
}

TEST_CASE("reordering keeps the depth minimal and moves as little as brute force") {
  Rng rng(13);
  int reordered = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int n = trial % 2 ? 7 : 13, r = trial % 2 ? 3 : 4;
    ShardStacks s = initial_stacks(layout_of(n, r));
    for (int failed = 0; failed < n - 1; ++failed) {
      int g;
      do g = int(rng.below(uint64_t(n)));
      while (!s.alive[g]);
      s.alive[g] = false;
      const auto result = run_reorder(s);
      if (result.outcome == ReorderOutcome::wiped_out) break;
      check_result(s, result);
      if (n == 7) CHECK(result.moves == brute_min_moves(s, result.depth));
      reordered += result.outcome == ReorderOutcome::reordered;
      s.stacks = result.stacks;  // the next failure starts from the committed stacks
    }
  }
  CHECK(reordered > 0);
}

TEST_CASE("a wipe-out is reported with the shard types lost") {
  const auto layout = layout_of(7, 3);
  ShardStacks s = initial_stacks(layout);
  const auto hosts = hosts_of_types(layout);
  for (int g : hosts[4]) s.alive[g] = false;
  const auto r = run_reorder(s);
  CHECK(r.outcome == ReorderOutcome::wiped_out);
  CHECK(std::find(r.lost.begin(), r.lost.end(), 4) != r.lost.end());
  CHECK(r.provider[4] == -1);
  CHECK_FALSE(*depth_feasible(s, 3));
}

TEST_CASE("malformed stacks are errors") {
  ShardStacks s{3, {{0, 1}, {1, 2}, {2, 0}}, {true, true}};
  CHECK_FALSE(reorder(s).ok());
  s.alive.push_back(true);
  CHECK(reorder(s).ok());
  s.stacks[1] = {1, 1};
  auto twice = reorder(s);
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message() == "group 1: shard type 1 twice in one stack");
  s.stacks[1] = {1, 3};
  CHECK_FALSE(reorder(s).ok());
  CHECK_FALSE(depth_feasible(s, 0).ok());
}
