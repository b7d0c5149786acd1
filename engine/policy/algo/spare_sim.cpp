// spare_sim.cpp — Monte-Carlo check of SPARe's closed forms (see spare.h): groups fail in uniformly
// random order until the first wipe-out; optionally the minimal all-reduce depth is tracked after
// every masked failure (it never decreases as groups fail, so each search starts from the last).
#include <cmath>
#include <numeric>

#include "policy/algo/rng.h"
#include "policy/algo/spare.h"

namespace sal::algo {
namespace {

struct Trial {
  int endured = 0;
  std::vector<int> depths;  // minimal depth after k = 0..endured failures (measure_depth only)
};

std::vector<int> random_order(int n, Rng& rng) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(uint64_t(i) + 1)]);
  return order;
}

// The smallest feasible depth after `failures` failures, searching upwards from `from`.
int next_depth(const ShardStacks& state, int failures, int from) {
  int depth = std::max(from, *min_depth_bound(state.shard_types, failures));
  while (!*depth_feasible(state, depth)) ++depth;
  return depth;
}

Trial run_trial(const ShardLayout& layout, Rng& rng, bool measure_depth) {
  Trial trial;
  std::vector<int> remaining(size_t(layout.groups), layout.redundancy);
  ShardStacks state = initial_stacks(layout);
  if (measure_depth) trial.depths.push_back(1);
  const auto order = random_order(layout.groups, rng);
  for (int i = 0; i < layout.groups; ++i) {
    bool wiped = false;
    for (int t : layout.hosted[order[i]]) wiped = --remaining[t] == 0 || wiped;
    if (wiped) return trial;
    trial.endured = i + 1;
    if (!measure_depth) continue;
    state.alive[order[i]] = false;
    trial.depths.push_back(next_depth(state, i + 1, trial.depths.back()));
  }
  return trial;
}

void add_depths(const Trial& trial, std::vector<double>& sum, std::vector<int>& count) {
  for (size_t k = 0; k < trial.depths.size(); ++k) {
    if (k >= sum.size()) {
      sum.resize(k + 1, 0);
      count.resize(k + 1, 0);
    }
    sum[k] += trial.depths[k];
    ++count[k];
  }
}

}  // namespace

Result<SpareSimResult> simulate_spare(int groups, int redundancy, const SpareSimOptions& options) {
  if (options.trials < 1) return fail("need at least one trial, got ", options.trials);
  auto layout = spare_layout(groups, redundancy);
  if (!layout.ok()) return layout.error();
  Rng rng(options.seed);
  double sum = 0, sum_sq = 0;
  std::vector<double> depth_sum;
  std::vector<int> depth_count;
  for (int i = 0; i < options.trials; ++i) {
    const Trial trial = run_trial(*layout, rng, options.measure_depth);
    sum += trial.endured;
    sum_sq += double(trial.endured) * trial.endured;
    add_depths(trial, depth_sum, depth_count);
  }
  SpareSimResult r;
  r.trials = options.trials;
  r.mean_endured = sum / options.trials;
  const double var = std::max(0.0, sum_sq / options.trials - r.mean_endured * r.mean_endured);
  r.stderr_endured = std::sqrt(var / options.trials);
  double all = 0;
  int states = 0;
  for (size_t k = 0; k < depth_sum.size(); ++k) {
    r.depth_by_failures.push_back(depth_sum[k] / depth_count[k]);
    all += depth_sum[k];
    states += depth_count[k];
  }
  r.mean_depth = states ? all / states : 0;
  return r;
}

}  // namespace sal::algo
