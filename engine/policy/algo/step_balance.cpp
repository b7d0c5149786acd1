// step_balance.cpp — see step_balance.h. The split is core/expert_split's, the dispatcher's own.
#include "policy/algo/step_balance.h"

#include <algorithm>

#include "core/expert_split.h"

namespace sal::algo {

double step_imbalance(const LayerPlacement& layer, const std::vector<std::vector<uint32_t>>& steps, bool by_counts) {
  if (steps.empty()) return 1;
  const size_t experts = size_t(std::max(layer.experts, 0));
  const SplitTable units = units_of(layer.nodes, experts);
  double sum = 0;
  for (const auto& counts : steps) {
    std::vector<uint64_t> totals(experts, 0);
    for (size_t e = 0; e < experts && e < counts.size(); ++e) totals[e] = counts[e];
    sum += split_imbalance(by_counts ? balanced_split(totals, units, {}) : even_split(totals, units, {}), {});
  }
  return sum / double(steps.size());
}

Result<StepsByLayer> steps_by_layer(const std::vector<std::vector<std::vector<uint32_t>>>& steps, size_t layers) {
  StepsByLayer out(steps.empty() ? 0 : layers);
  for (size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].size() != layers) return fail("step ", s + 1, " has ", steps[s].size(), " layers, not ", layers);
    for (size_t l = 0; l < layers; ++l) out[l].push_back(steps[s][l]);
  }
  return out;
}

}  // namespace sal::algo
