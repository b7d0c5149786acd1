// recovery_modes.cpp — see recovery_modes.h.
#include "mesh/recovery_modes.h"

#include <algorithm>

#include "core/strings.h"

namespace sal::mesh {
namespace {

bool is_ready(const std::vector<Participant>& ready, const Participant& p) {
  return std::find(ready.begin(), ready.end(), p) != ready.end();
}

// Workers of the plan in force first (in rank order, so its groups stay together), then the others.
std::vector<Participant> whole_groups(uint32_t ep, const std::vector<Participant>& ready,
                                      const std::optional<AppliedPlan>& applied) {
  std::vector<Participant> order;
  if (applied)
    for (const auto& r : applied->ranks)
      if (is_ready(ready, r)) order.push_back(r);
  for (const auto& r : ready)
    if (std::find(order.begin(), order.end(), r) == order.end()) order.push_back(r);
  order.resize(order.size() / ep * ep);
  return order;
}

bool a_whole_group_survives(uint32_t ep, const std::vector<Participant>& ready, const AppliedPlan& applied) {
  for (size_t g = 0; g + ep <= applied.ranks.size(); g += ep) {
    bool whole = true;
    for (size_t i = g; i < g + ep; ++i) whole = whole && is_ready(ready, applied.ranks[i]);
    if (whole) return true;
  }
  return false;
}

bool same_workers(std::vector<Participant> a, std::vector<Participant> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

}  // namespace

WorkerChoice choose_workers(const std::string& mode, uint32_t ep, const std::vector<Participant>& ready,
                            const std::optional<AppliedPlan>& applied, uint64_t step) {
  WorkerChoice c;
  if (mode == "elastic") {
    c.use = ready;
    auto lost = step > 0 ? lost_state(applied, ready) : std::vector<std::string>{};
    c.restore = !lost.empty();
    if (c.restore) c.why = "every copy lost: " + join(lost, ", ");
    return c;
  }
  ep = std::max<uint32_t>(ep, 1);
  c.use = whole_groups(ep, ready, applied);
  if (c.use.empty()) {
    c.why = std::to_string(ready.size()) + " ready workers are fewer than one expert-parallel group of " +
            std::to_string(ep);
    return c;
  }
  if (step == 0 || !applied) return c;
  if (mode == "checkpoint-restart" && !same_workers(c.use, applied->ranks)) {
    c.restore = true;
    c.why = "checkpoint-restart: the workers in use changed (" + std::to_string(applied->ranks.size()) + " -> " +
            std::to_string(c.use.size()) + ")";
  } else if (mode == "fixed-ep-ft" && !a_whole_group_survives(ep, ready, *applied)) {
    c.restore = true;
    c.why = "fixed-ep-ft: no whole expert-parallel group of plan " + std::to_string(applied->number) + " survives";
  }
  return c;
}

}  // namespace sal::mesh
