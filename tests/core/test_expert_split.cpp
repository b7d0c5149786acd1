// test_expert_split.cpp — the split of a layer's expert tokens over their holders: even as the
// dispatcher always split them, and balanced by the step's counts (never a busier peak than even,
// every token once, none where an expert has no replica), hand-worked and randomized.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/expert_split.h"

using namespace sal;

namespace {

double peak_of(const SplitTable& q, const std::vector<uint32_t>& weights) {
  double p = 0;
  for (size_t j = 0; j < q[0].size(); ++j) {
    double load = 0;
    for (const auto& row : q) load += row[j];
    p = std::max(p, load / (weights.empty() ? 1.0 : double(weights[j])));
  }
  return p;
}

// Every expert's quotas add up to its tokens and sit only where it has a replica of weight > 0.
void check_valid(const SplitTable& q, const std::vector<uint64_t>& totals, const SplitTable& units,
                 const std::vector<uint32_t>& weights) {
  REQUIRE(q.size() == totals.size());
  for (size_t e = 0; e < q.size(); ++e) {
    uint64_t sum = 0;
    for (size_t j = 0; j < q[e].size(); ++j) {
      sum += q[e][j];
      if (units[e][j] == 0 || (!weights.empty() && weights[j] == 0)) CHECK(q[e][j] == 0);
    }
    CHECK(sum == totals[e]);
  }
}

}  // namespace

TEST_CASE("even split: each unit the same part, the first units one more") {
  const SplitTable q = even_split({5, 4}, {{2, 1, 0}, {0, 1, 1}}, {});
  CHECK(q[0] == std::vector<uint32_t>{4, 1, 0});
  CHECK(q[1] == std::vector<uint32_t>{0, 2, 2});
}

TEST_CASE("balanced split: an expert's tokens leave the worker a hot expert shares") {
  // expert 0 (90 tokens) on workers 0 and 1; expert 1 (90) on workers 1 and 2. Even puts 90 on
  // worker 1 and 45 on the others; by counts each worker takes about 60.
  const std::vector<uint64_t> totals = {90, 90};
  const SplitTable units = {{1, 1, 0}, {0, 1, 1}};
  const SplitTable even = even_split(totals, units, {});
  CHECK(peak_of(even, {}) == 90);
  const SplitTable q = balanced_split(totals, units, {});
  check_valid(q, totals, units, {});
  CHECK(peak_of(q, {}) <= 61);  // 60 is the optimum; ties in rounding may leave one token
  CHECK(split_imbalance(q, {}) < 1.02);
  CHECK(split_imbalance(even, {}) == doctest::Approx(1.5));
}

TEST_CASE("balanced split: weights are capacities") {
  // one expert on two workers, the second at half weight: it takes a third
  const SplitTable q = balanced_split({90}, {{1, 1}}, {1000, 500});
  CHECK(q[0] == std::vector<uint32_t>{60, 30});
  // a worker of weight 0 takes nothing
  const SplitTable z = balanced_split({90}, {{1, 1}}, {1000, 0});
  CHECK(z[0] == std::vector<uint32_t>{90, 0});
}

TEST_CASE("randomized: balanced is valid, deterministic and never above even's peak") {
  std::mt19937 rng(7);
  int better = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t E = 1 + rng() % 16, W = 1 + rng() % 12;
    SplitTable units(E, std::vector<uint32_t>(W, 0));
    std::vector<uint64_t> totals(E);
    for (size_t e = 0; e < E; ++e) {
      const size_t r = 1 + rng() % W;
      for (size_t k = 0; k < r; ++k) units[e][rng() % W] += 1;
      totals[e] = rng() % 3 == 0 ? 0 : rng() % 2000;
    }
    std::vector<uint32_t> weights;
    if (trial % 3 == 0)
      for (size_t j = 0; j < W; ++j) weights.push_back(200 + rng() % 1000);
    const SplitTable q = balanced_split(totals, units, weights);
    check_valid(q, totals, units, weights);
    CHECK(q == balanced_split(totals, units, weights));
    const double even = peak_of(even_split(totals, units, weights), weights), mine = peak_of(q, weights);
    CHECK(mine <= even);
    better += mine < even;
  }
  CHECK(better > 100);  // most random layers have some expert to move
}
