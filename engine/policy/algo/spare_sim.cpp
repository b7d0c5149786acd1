// spare_sim.cpp — Monte-Carlo check of SPARe's closed forms (see spare.h): groups fail in uniformly
// random order until the first wipe-out; optionally the minimal all-reduce depth is tracked after
// every masked failure, incrementally (SpareDepthTracker).
#include <cmath>
#include <deque>
#include <numeric>
#include <optional>

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

Trial run_trial(const ShardLayout& layout, Rng& rng, bool measure_depth) {
  Trial trial;
  std::vector<int> remaining(size_t(layout.groups), layout.redundancy);
  std::optional<SpareDepthTracker> depth;
  if (measure_depth) {
    depth.emplace(layout);
    trial.depths.push_back(depth->depth());
  }
  const auto order = random_order(layout.groups, rng);
  for (int i = 0; i < layout.groups; ++i) {
    bool wiped = false;
    for (int t : layout.hosted[order[i]]) wiped = --remaining[t] == 0 || wiped;
    if (wiped) return trial;
    trial.endured = i + 1;
    if (!measure_depth) continue;
    depth->fail_group(order[i]);
    trial.depths.push_back(depth->depth());
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

// ---- SpareDepthTracker ----

SpareDepthTracker::SpareDepthTracker(const ShardLayout& layout)
    : hosts_(hosts_of_types(layout)),
      alive_(size_t(layout.groups), 1),
      owner_(size_t(layout.groups), -1),
      carried_(size_t(layout.groups)),
      slot_(size_t(layout.groups), -1),
      group_seen_(size_t(layout.groups), 0),
      type_seen_(size_t(layout.groups), 0),
      enters_(size_t(layout.groups), -1) {
  for (int t = 0; t < int(hosts_.size()); ++t)
    while (!place(t)) ++depth_;  // every type has a host, so a round more always makes room
}

void SpareDepthTracker::assign(int type, int group) {
  owner_[size_t(type)] = group;
  slot_[size_t(type)] = int(carried_[size_t(group)].size());
  carried_[size_t(group)].push_back(type);
}

void SpareDepthTracker::unassign(int type) {
  auto& list = carried_[size_t(owner_[size_t(type)])];
  const int at = slot_[size_t(type)];
  list[size_t(at)] = list.back();
  slot_[size_t(list[size_t(at)])] = at;
  list.pop_back();
  owner_[size_t(type)] = -1;
}

// Breadth-first over groups from `type`: a reached group with room ends the path; a full one
// offers each of its types to their other hosts. enters_[g] is the type that moves into g.
bool SpareDepthTracker::place(int type) {
  ++stamp_;
  std::deque<int> types{type};
  type_seen_[size_t(type)] = stamp_;
  while (!types.empty()) {
    const int u = types.front();
    types.pop_front();
    for (int g : hosts_[size_t(u)]) {
      if (!alive_[size_t(g)] || group_seen_[size_t(g)] == stamp_ || g == owner_[size_t(u)]) continue;
      group_seen_[size_t(g)] = stamp_;
      enters_[size_t(g)] = u;
      if (int(carried_[size_t(g)].size()) < depth_) {
        // shift every type on the path one group along, from the free end back to `type`
        for (int at = g; at >= 0;) {
          const int mover = enters_[size_t(at)];
          const int from = owner_[size_t(mover)];
          if (from >= 0) unassign(mover);
          assign(mover, at);
          at = from;
        }
        return true;
      }
      for (int v : carried_[size_t(g)])
        if (type_seen_[size_t(v)] != stamp_) {
          type_seen_[size_t(v)] = stamp_;
          types.push_back(v);
        }
    }
  }
  return false;
}

bool SpareDepthTracker::fail_group(int g) {
  std::vector<int> freed = carried_[size_t(g)];
  for (int t : freed) {
    bool hosted = false;
    for (int h : hosts_[size_t(t)]) hosted = hosted || (h != g && alive_[size_t(h)]);
    if (!hosted) return false;
  }
  alive_[size_t(g)] = 0;
  for (int t : freed) unassign(t);
  for (int t : freed)
    while (!place(t)) ++depth_;
  return true;
}

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
