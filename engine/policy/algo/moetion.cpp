// moetion.cpp — see moetion.h.
//
// With the order fixed, an iteration holding the run R costs Σ_all compute + Σ_R (full − compute).
// So a run fits iff its extra bytes Σ_R (full − compute) stay within budget − Σ_all compute; greedy
// packing gives the fewest runs, and a binary search on the largest run's extra bytes (with the run
// count held at that minimum) gives the most even split.
#include "policy/algo/moetion.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace sal::algo {
namespace {

// Extra bytes of each operator when active, in schedule order.
std::vector<uint64_t> extras_in_order(const std::vector<CheckpointOperator>& ops,
                                      const std::vector<int>& order) {
  std::vector<uint64_t> extra;
  for (int i : order) extra.push_back(ops[i].full_bytes - ops[i].compute_bytes);
  return extra;
}

// Greedy consecutive runs with extra bytes ≤ cap each; returns the run starts.
std::vector<size_t> pack(const std::vector<uint64_t>& extra, uint64_t cap) {
  std::vector<size_t> starts;
  uint64_t run = 0;
  for (size_t i = 0; i < extra.size(); ++i) {
    if (starts.empty() || run + extra[i] > cap) {
      starts.push_back(i);
      run = 0;
    }
    run += extra[i];
  }
  return starts;
}

// The smallest cap in [lo, hi] that still packs into `runs` runs.
uint64_t balanced_cap(const std::vector<uint64_t>& extra, uint64_t lo, uint64_t hi, size_t runs) {
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (pack(extra, mid).size() <= runs) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

Status check_inputs(const std::vector<CheckpointOperator>& ops, double seconds, double bandwidth) {
  if (ops.empty()) return fail("no operators to schedule");
  if (!(std::isfinite(seconds) && seconds > 0)) return fail("iteration time must be > 0");
  if (!(std::isfinite(bandwidth) && bandwidth > 0)) return fail("host bandwidth must be > 0");
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].full_bytes < ops[i].compute_bytes)
      return fail("operator ", i, ": full state (", ops[i].full_bytes,
                  " bytes) smaller than its compute weights (", ops[i].compute_bytes, " bytes)");
  return ok_status();
}

WindowSchedule build(const std::vector<int>& order, const std::vector<uint64_t>& extra,
                     const std::vector<size_t>& starts, uint64_t all_compute, double budget) {
  WindowSchedule w;
  w.window = int(starts.size());
  w.order = order;
  w.budget_bytes = budget;
  for (size_t r = 0; r < starts.size(); ++r) {
    const size_t end = r + 1 < starts.size() ? starts[r + 1] : order.size();
    w.iterations.emplace_back(order.begin() + std::ptrdiff_t(starts[r]),
                              order.begin() + std::ptrdiff_t(end));
    w.snapshot_bytes.push_back(std::accumulate(extra.begin() + std::ptrdiff_t(starts[r]),
                                               extra.begin() + std::ptrdiff_t(end), all_compute));
  }
  return w;
}

}  // namespace

std::vector<int> popularity_order(const std::vector<CheckpointOperator>& operators) {
  std::vector<int> order(operators.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (operators[a].expert != operators[b].expert) return operators[a].expert;
    return operators[a].expert && operators[a].popularity < operators[b].popularity;
  });
  return order;
}

Result<WindowSchedule> find_window(const std::vector<CheckpointOperator>& operators,
                                   double iteration_seconds, double bandwidth_bytes_per_second) {
  SAL_TRY(check_inputs(operators, iteration_seconds, bandwidth_bytes_per_second));
  const double budget = iteration_seconds * bandwidth_bytes_per_second;
  uint64_t all_compute = 0;
  for (const auto& op : operators) all_compute += op.compute_bytes;
  const auto order = popularity_order(operators);
  const auto extra = extras_in_order(operators, order);
  const uint64_t largest = *std::max_element(extra.begin(), extra.end());
  if (double(all_compute) + double(largest) > budget)
    return fail("no window fits: one iteration may move ", budget,
                " bytes, but the compute weights of ", "all operators (", all_compute,
                ") plus the largest operator's extra state (", largest, ") need more");
  const double room = budget - double(all_compute);
  const uint64_t cap = room >= double(UINT64_MAX) ? UINT64_MAX : uint64_t(room);
  const size_t runs = pack(extra, cap).size();
  const auto starts = pack(extra, balanced_cap(extra, largest, cap, runs));
  return build(order, extra, starts, all_compute, budget);
}

Result<ReorderCheck> check_reorder(const std::vector<double>& before,
                                   const std::vector<double>& after,
                                   const ReorderTrigger& trigger) {
  if (before.size() != after.size())
    return fail("activation frequencies for ", before.size(), " experts before and ", after.size(),
                " after");
  for (size_t e = 0; e < before.size(); ++e)
    if (!(before[e] >= 0 && after[e] >= 0 && std::isfinite(before[e]) && std::isfinite(after[e])))
      return fail("expert ", e, ": activation frequency must be a finite number >= 0");
  ReorderCheck c;
  c.experts = int(before.size());
  for (size_t e = 0; e < before.size(); ++e)
    c.changed += std::fabs(after[e] - before[e]) > trigger.change * before[e] ? 1 : 0;
  c.reorder = c.experts > 0 && double(c.changed) >= trigger.fraction * double(c.experts);
  return c;
}

}  // namespace sal::algo
