// expert_split.cpp — see expert_split.h.
#include "core/expert_split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/apportion.h"

namespace sal {
namespace {

// Sweeps over the experts end when one lowers the spread by less than kSweepGain, or after
// kMaxSweeps (experts sharing holders pass tokens back and forth, converging geometrically).
constexpr int kMaxSweeps = 64;
constexpr double kSweepGain = 1e-4;

double weight_of(const std::vector<uint32_t>& weights, size_t j) { return weights.empty() ? 1.0 : double(weights[j]); }

// One expert's even quota per worker: its tokens over the units, weighted by their workers.
std::vector<uint32_t> even_quota(uint64_t total, const std::vector<uint32_t>& units, const std::vector<uint32_t>& weights) {
  std::vector<uint64_t> unit_weights;
  for (size_t j = 0; j < units.size(); ++j)
    unit_weights.insert(unit_weights.end(), units[j], weights.empty() ? 1 : uint64_t(weights[j]));
  const std::vector<uint64_t> per_unit = apportion(total, unit_weights);
  std::vector<uint32_t> q(units.size(), 0);
  size_t unit = 0;
  for (size_t j = 0; j < units.size(); ++j)
    for (uint32_t k = 0; k < units[j]; ++k) q[j] += uint32_t(per_unit[unit++]);
  return q;
}

struct Loads {
  std::vector<double> tokens;  // per worker
  const std::vector<uint32_t>& weights;
  double level(size_t j) const { return tokens[j] / weight_of(weights, j); }
};

// The water level: `total` poured over `holders` on top of their loads, the least loaded (over
// weight) filled first; each holder's real part, max(0, level * w - load), in `holders`' order.
std::vector<double> pour_real(uint64_t total, const std::vector<size_t>& holders, const Loads& l) {
  std::vector<size_t> by_level(holders.size());
  std::iota(by_level.begin(), by_level.end(), size_t(0));
  std::stable_sort(by_level.begin(), by_level.end(),
                   [&](size_t a, size_t b) { return l.level(holders[a]) < l.level(holders[b]); });
  double under = 0, w = 0, level = 0;
  size_t filled = 0;
  while (filled < by_level.size()) {
    const size_t j = holders[by_level[filled]];
    under += l.tokens[j];
    w += weight_of(l.weights, j);
    ++filled;
    level = (double(total) + under) / w;
    if (filled == by_level.size() || level <= l.level(holders[by_level[filled]])) break;
  }
  std::vector<double> part(holders.size(), 0.0);
  for (size_t i = 0; i < filled; ++i) {
    const size_t j = holders[by_level[i]];
    part[by_level[i]] = std::max(0.0, level * weight_of(l.weights, j) - l.tokens[j]);
  }
  return part;
}

// The real parts in integers that add up to `total`: floors, then one each by largest remainder
// (ties: the earlier part, the lower worker).
std::vector<uint32_t> integer_parts(uint64_t total, const std::vector<double>& part) {
  std::vector<uint32_t> q(part.size(), 0);
  uint64_t given = 0;
  for (size_t i = 0; i < part.size(); ++i) given += q[i] = uint32_t(std::floor(part[i]));
  while (given > total) {  // rounding error only
    auto big = std::max_element(q.begin(), q.end());
    --*big;
    --given;
  }
  std::vector<size_t> order(part.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return part[a] - std::floor(part[a]) > part[b] - std::floor(part[b]); });
  for (size_t i : order)  // fewer than the positive parts are left
    if (given < total && part[i] > 0) ++q[i], ++given;
  if (given < total) q[size_t(std::max_element(part.begin(), part.end()) - part.begin())] += uint32_t(total - given);
  return q;
}

// Sum over workers of (load / weight)^2 * weight: what water-filling lowers.
double spread(const Loads& l, const std::vector<size_t>& holders) {
  double s = 0;
  for (size_t j : holders) s += l.level(j) * l.tokens[j];
  return s;
}

// Pours expert e again over its holders; keeps the new split only when it spreads them more evenly.
bool repour(uint64_t total, const std::vector<size_t>& holders, std::vector<uint32_t>& q, Loads& l) {
  const double before = spread(l, holders);
  for (size_t j : holders) l.tokens[j] -= q[j];
  const std::vector<uint32_t> fresh = integer_parts(total, pour_real(total, holders, l));
  for (size_t i = 0; i < holders.size(); ++i) l.tokens[holders[i]] += fresh[i];
  if (spread(l, holders) < before * (1 - 1e-12)) {
    for (size_t i = 0; i < holders.size(); ++i) q[holders[i]] = fresh[i];
    return true;
  }
  for (size_t i = 0; i < holders.size(); ++i) l.tokens[holders[i]] += double(q[holders[i]]) - double(fresh[i]);
  return false;
}

double peak(const SplitTable& quota, const std::vector<uint32_t>& weights) {
  if (quota.empty()) return 0;
  double p = 0;
  for (size_t j = 0; j < quota[0].size(); ++j) {
    double load = 0;
    for (const auto& row : quota) load += row[j];
    if (weight_of(weights, j) > 0) p = std::max(p, load / weight_of(weights, j));
  }
  return p;
}

}  // namespace

SplitTable even_split(const std::vector<uint64_t>& totals, const SplitTable& units, const std::vector<uint32_t>& weights) {
  SplitTable q;
  for (size_t e = 0; e < totals.size() && e < units.size(); ++e) q.push_back(even_quota(totals[e], units[e], weights));
  return q;
}

SplitTable balanced_split(const std::vector<uint64_t>& totals, const SplitTable& units,
                          const std::vector<uint32_t>& weights) {
  const SplitTable even = even_split(totals, units, weights);
  if (even.empty()) return even;
  SplitTable q = even;
  const size_t W = q[0].size();
  Loads l{std::vector<double>(W, 0.0), weights};
  for (const auto& row : q)
    for (size_t j = 0; j < W; ++j) l.tokens[j] += row[j];
  std::vector<std::vector<size_t>> holders(q.size());
  for (size_t e = 0; e < q.size(); ++e)
    for (size_t j = 0; j < W; ++j)
      if (units[e][j] > 0 && weight_of(weights, j) > 0) holders[e].push_back(j);
  std::vector<size_t> order(q.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return totals[a] > totals[b]; });
  std::vector<size_t> all(W);
  std::iota(all.begin(), all.end(), size_t(0));
  double before = spread(l, all);
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool moved = false;
    for (size_t e : order)
      if (totals[e] > 0 && holders[e].size() > 1) moved |= repour(totals[e], holders[e], q[e], l);
    const double after = spread(l, all);
    if (!moved || after > before * (1 - kSweepGain)) break;
    before = after;
  }
  return peak(q, weights) <= peak(even, weights) ? q : even;
}

double split_imbalance(const SplitTable& quota, const std::vector<uint32_t>& weights) {
  if (quota.empty()) return 1;
  double load = 0, w = 0;
  for (size_t j = 0; j < quota[0].size(); ++j) {
    for (const auto& row : quota) load += row[j];
    w += weight_of(weights, j);
  }
  return load > 0 && w > 0 ? peak(quota, weights) / (load / w) : 1;
}

}  // namespace sal
