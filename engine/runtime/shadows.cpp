// shadows.cpp — see shadows.h.
#include "runtime/shadows.h"

#include <algorithm>

namespace sal::runtime {
namespace {

// Each rank's rows over its weight (the time its experts take, up to a constant); a rank of weight
// 0 computes nothing, so it counts nothing.
std::vector<double> rank_times(const std::vector<int64_t>& rows, const std::vector<uint32_t>& weights) {
  std::vector<double> t(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const double w = weights.empty() ? 1.0 : double(weights[i]);
    t[i] = w > 0 ? double(rows[i]) / w : 0.0;
  }
  return t;
}

double busiest(const std::vector<int64_t>& rows, const std::vector<uint32_t>& weights) {
  const auto t = rank_times(rows, weights);
  return t.empty() ? 0.0 : *std::max_element(t.begin(), t.end());
}

// The ranks' rows once expert e computes where its tokens are.
std::vector<int64_t> rows_if_shadowed(const DispatchSchedule& s, const std::vector<int64_t>& rows, int e) {
  std::vector<int64_t> out(rows);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] += int64_t(s.tokens[size_t(e)][i]) - int64_t(s.quota[size_t(e)][i]);
  return out;
}

bool can_shadow(const DispatchSchedule& s, const Counts& units, const std::vector<uint32_t>& weights, int e) {
  bool held = false;
  for (int i = 0; i < s.workers; ++i) {
    held = held || units[size_t(e)][size_t(i)] > 0;
    if (!weights.empty() && weights[size_t(i)] == 0 && s.tokens[size_t(e)][size_t(i)] > 0) return false;
  }
  return held;
}

int lowest_holder(const Counts& units, int e) {
  const auto& r = units[size_t(e)];
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] > 0) return int(i);
  return -1;
}

}  // namespace

bool ShadowPlan::any() const {
  return std::any_of(source.begin(), source.end(), [](int r) { return r >= 0; });
}

ShadowPlan choose_shadows(const DispatchSchedule& s, const Counts& units, const std::vector<uint32_t>& weights,
                          int64_t min_gain) {
  ShadowPlan p;
  p.source.assign(size_t(s.experts), -1);
  if (s.workers < 2 || s.tokens.size() != size_t(s.experts)) return p;
  std::vector<int64_t> rows(size_t(s.workers), 0);
  for (int e = 0; e < s.experts; ++e)
    for (int i = 0; i < s.workers; ++i) rows[size_t(i)] += s.quota[size_t(e)][size_t(i)];
  // candidates, most rows computed for other ranks first
  std::vector<std::pair<int64_t, int>> order;
  for (int e = 0; e < s.experts; ++e) {
    int64_t excess = 0;
    for (int i = 0; i < s.workers; ++i)
      excess = std::max(excess, int64_t(s.quota[size_t(e)][size_t(i)]) - int64_t(s.tokens[size_t(e)][size_t(i)]));
    if (excess > 0 && can_shadow(s, units, weights, e)) order.emplace_back(-excess, e);
  }
  std::sort(order.begin(), order.end());
  // the shortest prefix of them that leaves the busiest rank least busy
  const double before = busiest(rows, weights);
  double best = before;
  size_t best_k = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    rows = rows_if_shadowed(s, rows, order[k].second);
    const double now = busiest(rows, weights);
    if (now < best) best = now, best_k = k + 1;
  }
  if (before - best < std::max(double(min_gain), 0.05 * before)) return p;
  for (size_t k = 0; k < best_k; ++k) p.source[size_t(order[k].second)] = lowest_holder(units, order[k].second);
  return p;
}

void keep_shadowed_local(DispatchSchedule& s, const ShadowPlan& p) {
  for (int e = 0; e < s.experts; ++e) {
    if (!p.shadowed(e)) continue;
    for (int j = 0; j < s.workers; ++j) {
      std::fill(s.send[size_t(e)][size_t(j)].begin(), s.send[size_t(e)][size_t(j)].end(), 0u);
      s.send[size_t(e)][size_t(j)][size_t(j)] = s.tokens[size_t(e)][size_t(j)];
      s.quota[size_t(e)][size_t(j)] = s.tokens[size_t(e)][size_t(j)];
    }
  }
}

bool computes_shadow(const DispatchSchedule& s, const Counts& units, const ShadowPlan& p, int e, int rank) {
  return p.shadowed(e) && units[size_t(e)][size_t(rank)] == 0 && s.tokens[size_t(e)][size_t(rank)] > 0;
}

}  // namespace sal::runtime
