// test_moetion.cpp — MoEtion's window search: a hand-worked schedule, minimality against every
// contiguous split, the paper's equal-run sizing never beating it, ordering, the reorder trigger.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "policy/algo/moetion.h"
#include "policy/algo/rng.h"

using namespace sal::algo;

namespace {

// Four experts (12 bytes full, 2 compute) with popularities 0.4, 0.1, 0.3, 0.2, and one non-expert
// operator (60 full, 10 compute). Compute weights of everything: 18 bytes.
std::vector<CheckpointOperator> small_model() {
  std::vector<CheckpointOperator> ops;
  for (double p : {0.4, 0.1, 0.3, 0.2}) ops.push_back({12, 2, p, true});
  ops.push_back({60, 10, 0, false});
  return ops;
}

uint64_t iteration_bytes(const std::vector<CheckpointOperator>& ops,
                         const std::vector<int>& active) {
  uint64_t b = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool on = std::find(active.begin(), active.end(), int(i)) != active.end();
    b += on ? ops[i].full_bytes : ops[i].compute_bytes;
  }
  return b;
}

// The fewest contiguous runs of `order` that each fit, by trying every split (n ≤ 12).
int brute_window(const std::vector<CheckpointOperator>& ops, const std::vector<int>& order,
                 double budget) {
  const int n = int(order.size());
  int best = INT32_MAX;
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    bool fits = true;
    std::vector<int> run;
    for (int i = 0; i < n && fits; ++i) {
      run.push_back(order[i]);
      if (i == n - 1 || (cuts >> i & 1)) {
        fits = double(iteration_bytes(ops, run)) <= budget;
        run.clear();
      }
    }
    if (fits) best = std::min(best, std::popcount(cuts) + 1);
  }
  return best;
}

// The paper's sizing: a ops per iteration, a stepped down from n until every run fits.
int equal_run_window(const std::vector<CheckpointOperator>& ops, const std::vector<int>& order,
                     double budget) {
  const int n = int(order.size());
  for (int a = n; a >= 1; --a) {
    bool fits = true;
    for (int start = 0; start < n; start += a) {
      std::vector<int> run(order.begin() + start, order.begin() + std::min(n, start + a));
      fits = fits && double(iteration_bytes(ops, run)) <= budget;
    }
    if (fits) return (n + a - 1) / a;
  }
  return INT32_MAX;
}

}  // namespace

TEST_CASE("window search on a hand-worked model") {
  const auto ops = small_model();
  // Budget 100 bytes: all four experts at once add 40 (58 in all), the non-expert adds 50 (68);
  // together they would need 108. Two iterations.
  auto w = find_window(ops, 1.0, 100.0);
  REQUIRE(w.ok());
  CHECK(w->window == 2);
  CHECK(w->order == std::vector<int>{1, 3, 2, 0, 4});
  CHECK(w->iterations == std::vector<std::vector<int>>{{1, 3, 2, 0}, {4}});
  CHECK(w->snapshot_bytes == std::vector<uint64_t>{58, 68});
  // With 200 bytes per iteration everything fits at once.
  auto one = find_window(ops, 2.0, 100.0);
  REQUIRE(one.ok());
  CHECK(one->window == 1);
  CHECK(one->snapshot_bytes == std::vector<uint64_t>{108});
  // Below 68 bytes not even the non-expert operator fits on its own.
  auto none = find_window(ops, 1.0, 67.0);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("no window fits") != std::string::npos);
}

TEST_CASE("the window is the fewest contiguous runs, never more than the paper's equal runs") {
  Rng rng(41);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + int(rng.below(11));
    std::vector<CheckpointOperator> ops;
    for (int i = 0; i < n; ++i) {
      const uint64_t compute = 1 + rng.below(20);
      ops.push_back(
          {compute * (2 + rng.below(8)), compute, double(rng.below(100)), rng.below(5) != 0});
    }
    const double budget = double(50 + rng.below(400));
    auto w = find_window(ops, 1.0, budget);
    const auto order = popularity_order(ops);
    const int brute = brute_window(ops, order, budget);
    if (!w.ok()) {
      CHECK(brute == INT32_MAX);
      continue;
    }
    CHECK(w->window == brute);
    CHECK(w->window <= equal_run_window(ops, order, budget));
    std::vector<int> seen;
    for (size_t i = 0; i < w->iterations.size(); ++i) {
      CHECK(double(w->snapshot_bytes[i]) <= budget);
      CHECK(w->snapshot_bytes[i] == iteration_bytes(ops, w->iterations[i]));
      seen.insert(seen.end(), w->iterations[i].begin(), w->iterations[i].end());
    }
    CHECK(seen == order);  // every operator once, in order
  }
}

TEST_CASE("experts go in ascending popularity, non-experts last in their given order") {
  const std::vector<CheckpointOperator> ops = {
      {4, 1, 0.0, false}, {4, 1, 0.9, true}, {4, 1, 0.0, false},
      {4, 1, 0.2, true},  {4, 1, 0.2, true},
  };
  CHECK(popularity_order(ops) == std::vector<int>{3, 4, 1, 0, 2});
}

TEST_CASE("inputs the model cannot take are errors") {
  CHECK_FALSE(find_window({}, 1, 1).ok());
  CHECK_FALSE(find_window(small_model(), 0, 100).ok());
  CHECK_FALSE(find_window(small_model(), 1, -5).ok());
  auto bad = find_window({{1, 2, 0, true}}, 1, 100);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() ==
        "operator 0: full state (1 bytes) smaller than its compute weights (2 bytes)");
}

TEST_CASE("reorder when at least 25 % of experts moved by more than 10 %") {
  const std::vector<double> before = {100, 100, 100, 100, 100, 100, 100, 100};
  auto two = before;
  two[0] = 120;
  two[5] = 85;
  auto r = check_reorder(before, two);
  REQUIRE(r.ok());
  CHECK(r->changed == 2);
  CHECK(r->reorder);  // 2 of 8 = 25 %
  auto one = before;
  one[3] = 50;
  CHECK_FALSE(check_reorder(before, one)->reorder);
  auto edge = before;
  edge[0] = edge[1] = 110;  // exactly 10 %: not more than 10 %
  CHECK(check_reorder(before, edge)->changed == 0);
  CHECK(check_reorder({0, 5}, {1, 5})->changed == 1);  // dormant expert waking up
  CHECK_FALSE(check_reorder({1, 2}, {1}).ok());
  CHECK_FALSE(check_reorder({-1}, {1}).ok());
  CHECK_FALSE(check_reorder({}, {})->reorder);
}
