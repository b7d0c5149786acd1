// driver_digests.cpp — the job driver's part in catching corruption (driver.h, digests.h): when a
// step's last vote is in, the holders' digests of every unit are compared; a disagreement aborts
// the step before it commits (event unit_corrupt, naming the unit, the odd holders and the
// majority), and the next plan — the plan in force again, when the workers are the same —
// carries a transfer of the majority's copy to each odd holder; the step then runs again. A unit
// whose holders have no majority (or whose majority left) is brought back by a restore (the
// recovery ladder's sparse, dense or seed rung), since no copy can be told good.
#include <algorithm>

#include "job/driver.h"

namespace sal::job {

bool Driver::digests_disagree(phase::Running& r, const wire::StepVote& v) {
  const auto& t = r.tally;
  Participant p{v.node_id, v.index};
  if (!v.ok || !steps_.in_flight() || v.epoch != steps_.epoch() || v.step != t.step || !t.voted.count(p) ||
      t.voted.size() != steps_.participants().size() || t.digests.empty())
    return false;
  const auto found = compare_digests(t.digests);
  if (found.empty()) return false;
  std::string units;
  for (const Disagreement& d : found) {
    const std::string said = describe(d, cfg_.model);
    out_.push_back(act::Note{"unit_corrupt",
                             "step " + std::to_string(t.step) + ": " + said +
                                 (d.has_majority() ? "; the odd copies are repaired from the majority's and the step runs again"
                                                   : "; no copy can be told good: the model is restored"),
                             act::Level::warn, false, d.odd.empty() ? kNoNode : d.odd.front().node});
    const std::string name = model_units(cfg_.model)[d.unit].name();
    units += (units.empty() ? "" : ", ") + name;
    for (const auto& odd : d.has_majority() ? d.odd : std::vector<Participant>{}) ++corrupt_copies_[odd];
    if (d.has_majority()) out_.push_back(act::Journal{rec::Corrupt{d.odd.size()}});
    if (d.has_majority()) repairs_.from_majority.push_back({d.unit, d.majority, d.odd});
    else repairs_.unrepairable.push_back(name);
  }
  if (applied_ && !repairs_.from_step) repairs_.from_step = applied_->from_step;
  repairs_.abort_reason = "the holders' digests of " + units + " disagree (unit_corrupt)";
  return true;
}

std::vector<std::string> Driver::unrepairable() const {
  std::vector<std::string> out = repairs_.unrepairable;
  const auto units = model_units(cfg_.model);
  for (const Repair& r : repairs_.from_majority)
    if (std::none_of(r.from.begin(), r.from.end(), [&](const Participant& p) { return contains(view_.ready, p); }))
      out.push_back(units[r.unit].name() + " (every holder of the majority's copy left)");
  return out;
}

// The plan in force again when nothing but the repairs would change: same workers, no restore.
bool Driver::repair_keeps_plan() const {
  if (repairs_.from_majority.empty() || !unrepairable().empty() || !applied_) return false;
  auto ranks = applied_->ranks;
  std::sort(ranks.begin(), ranks.end());
  return ranks == view_.ready;
}

bool Driver::add_pending_repairs(PlanSwitch& sw, const plan::Plan& next, uint64_t number) {
  if (repairs_.from_majority.empty()) return true;
  auto added = add_repairs(sw, next, repairs_.from_majority, cfg_.model);
  if (!added) {
    note("repair_failed", "plan " + std::to_string(number) + ": " + added.error().message() + "; the model is restored",
         act::Level::warn);
    for (const Repair& r : repairs_.from_majority) repairs_.unrepairable.push_back(model_units(cfg_.model)[r.unit].name());
    repairs_.from_majority.clear();
    return false;
  }
  repairs_.plan = number;
  repairs_.keeps_placement = applied_ && sw.ranks == applied_->ranks && plan::same_placement(applied_->plan, next);
  note("repair", "plan " + std::to_string(number) + " carries " + std::to_string(*added) +
                     " transfer(s) of the majority's copy to the holders whose digests disagreed");
  return true;
}

// The plan that carried the repairs (or a restore, which replaces every copy) is in force: they
// are done. A repair that kept the plan keeps its rebalance clock too (train.rebalance_every
// counts from the plan's first step), so a repaired run re-plans where a fault-free run does.
void Driver::repairs_applied(const phase::Switching& p) {
  if (repairs_.empty() || (p.number != repairs_.plan && !p.restore)) return;
  if (!p.restore && repairs_.keeps_placement && repairs_.from_step && applied_) applied_->from_step = *repairs_.from_step;
  note("repaired", p.restore ? "the model was restored; the copies whose digests disagreed are replaced"
                             : "every copy whose digest disagreed now holds the majority's; step " +
                                   std::to_string(p.step) + " runs again");
  repairs_ = {};
}

}  // namespace sal::job
