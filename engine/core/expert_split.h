// expert_split.h — how a layer's expert tokens are split over the workers holding the experts'
// replicas for one step: the quotas the flexible dispatcher (runtime/dispatch.h) routes by, and the
// driver's step-by-step imbalance measures. The same integers on every machine.
//
// Even (Lazarus's dispatcher; train.dispatch = "even"): each expert's tokens are shared over its
// replica units in proportion to their workers' weights (the health policy's shares; equal without
// them), core/apportion.h — a worker holding two units of an expert takes two parts.
//
// By counts (train.dispatch = "counts"): the even split is the start; then, experts taken heaviest
// first, each expert's tokens are poured again over the workers holding it, given what the other
// experts put there, filling the least loaded ones first (water-filling, every worker's load over
// its weight), and a sweep repeats while it lowers the peak. A re-pour never raises the peak among
// the expert's holders, so the result is never worse than even: the busiest worker's load over its
// weight is at most even's. Where an expert's replicas sit on workers that also hold hot experts,
// its tokens move to its other holders, which the even split cannot do.
#pragma once

#include <cstdint>
#include <vector>

namespace sal {

using SplitTable = std::vector<std::vector<uint32_t>>;  // [expert][worker]

// totals[e]: expert e's tokens this step; units[e][j]: its replica units on worker j; weights[j]:
// worker j's weight (empty: all equal). An expert with tokens and no unit of positive weight gets
// nothing (the dispatcher refuses it before asking).
SplitTable even_split(const std::vector<uint64_t>& totals, const SplitTable& units, const std::vector<uint32_t>& weights);
SplitTable balanced_split(const std::vector<uint64_t>& totals, const SplitTable& units,
                          const std::vector<uint32_t>& weights);

// The split's busiest worker over the mean, each worker's load over its weight (1: even; 1 when
// there is no load).
double split_imbalance(const SplitTable& quota, const std::vector<uint32_t>& weights);

// A layer's replica units per expert and worker from its slots (slots[j]: the expert of each of
// worker j's slots, any integer type); experts outside [0, experts) are left out.
template <class Slots>
SplitTable units_of(const Slots& slots, size_t experts) {
  SplitTable units(experts, std::vector<uint32_t>(slots.size(), 0));
  for (size_t j = 0; j < slots.size(); ++j)
    for (auto slot : slots[j])
      if (const long long e = static_cast<long long>(slot); e >= 0 && size_t(e) < experts) ++units[size_t(e)][j];
  return units;
}

}  // namespace sal
