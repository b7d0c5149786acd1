// ladder.cpp — see ladder.h.
#include "job/ladder.h"

#include <algorithm>

#include "core/strings.h"

namespace sal::job {
namespace {

// The plan in force's groups that survive whole first (they hold every expert), then its other
// surviving workers, then the others; as many whole groups of them as there are.
std::vector<Participant> whole_groups(uint32_t ep, const std::vector<Participant>& ready,
                                      const std::optional<AppliedPlan>& applied) {
  std::vector<Participant> order;
  auto add = [&](const Participant& r) {
    if (contains(ready, r) && std::find(order.begin(), order.end(), r) == order.end()) order.push_back(r);
  };
  if (applied) {
    const auto& ranks = applied->ranks;
    for (size_t g = 0; g + ep <= ranks.size(); g += ep)
      if (std::all_of(ranks.begin() + long(g), ranks.begin() + long(g + ep), [&](const Participant& r) { return contains(ready, r); }))
        for (size_t i = g; i < g + ep; ++i) add(ranks[i]);
    for (const auto& r : ranks) add(r);
  }
  for (const auto& r : ready) add(r);
  order.resize(order.size() / ep * ep);
  return order;
}

bool a_whole_group_survives(uint32_t ep, const std::vector<Participant>& ready, const AppliedPlan& applied) {
  for (size_t g = 0; g + ep <= applied.ranks.size(); g += ep) {
    bool whole = true;
    for (size_t i = g; i < g + ep; ++i) whole = whole && contains(ready, applied.ranks[i]);
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

Rung forced_restore(const Restorable& have) { return have.dense_step ? Rung::dense : Rung::seed; }

const char* rung_name(Rung r) {
  switch (r) {
    case Rung::patch: return "patch";
    case Rung::elastic: return "elastic";
    case Rung::rebuild: return "rebuild";
    case Rung::sparse: return "sparse";
    case Rung::dense: return "dense";
    case Rung::seed: return "seed";
  }
  return "?";
}

Rung restore_rung(const std::vector<std::string>& lost, const Restorable& have) {
  if (lost.empty()) return Rung::elastic;
  if (have.rebuild && have.rebuild(lost)) return Rung::rebuild;
  // the window's replay leaves the state of step sparse_to + 1, a dense snapshot that of its step
  auto sparse_to = have.sparse_to ? have.sparse_to() : std::nullopt;
  if (sparse_to && (!have.dense_step || *have.dense_step <= *sparse_to + 1)) return Rung::sparse;
  return forced_restore(have);
}

WorkerChoice choose_workers(const std::string& mode, uint32_t ep, const std::vector<Participant>& ready,
                            const std::optional<AppliedPlan>& applied, uint64_t step, const Restorable& have) {
  WorkerChoice c;
  if (mode == "elastic") {
    c.use = ready;
    auto lost = step > 0 ? lost_state(applied, ready) : std::vector<std::string>{};
    c.rung = restore_rung(lost, have);
    if (c.restore()) c.why = "every copy lost: " + join(lost, ", ");
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
  auto lost = lost_state(applied, c.use);
  if (mode == "checkpoint-restart" && !same_workers(c.use, applied->ranks)) {
    c.rung = forced_restore(have);
    c.why = "checkpoint-restart: the workers in use changed (" + std::to_string(applied->ranks.size()) + " -> " +
            std::to_string(c.use.size()) + ")";
  } else if (mode == "fixed-ep-ft" && !a_whole_group_survives(ep, ready, *applied)) {
    c.rung = forced_restore(have);
    c.why = "fixed-ep-ft: no whole expert-parallel group of plan " + std::to_string(applied->number()) + " survives";
  } else if (!lost.empty()) {
    c.rung = restore_rung(lost, have);
    c.why = "every copy lost among the workers in use: " + join(lost, ", ");
  }
  return c;
}

}  // namespace sal::job
