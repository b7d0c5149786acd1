// driver_patch.cpp — the recovery ladder's first rung, SPARe's patch (ladder.h, rung 1): a rank of
// a grouped plan (parallel.groups > 1) lost in the middle of a step does not abort the step. The
// groups that lost ranks drop their work of it; the redundancy policy, told which groups are still
// in (act::DecidePatch), decides which of them compute the dropped groups' shard types; every
// surviving rank gets a wire::StepPatch (the extra types per group, the dropped groups, the ranks
// that synchronise over the patch's own data plane) and votes again; the step commits with the
// same global batch. A second loss in the same step patches again (from the start: the extra
// types are decided anew). Where the policy finds a shard type no surviving group hosts (a
// wipe-out), or nobody is left, the step aborts and the next rungs recover as before. After a
// patched step commits, the plan in force is re-planned at once: the damaged group recovers inside
// itself (elastic) and the cross-group plane, spent, is connected again.
#include <algorithm>

#include "job/driver.h"

namespace sal::job {

bool Driver::try_patch(phase::Running& r, const in::Lost& l) {
  if (!steps_.in_flight() || plan::group_count(applied_->plan) <= 1 || replaying()) return false;
  std::vector<Participant> gone;
  for (const auto& p : steps_.participants())
    if (p.node == l.node && (!l.worker || p.index == *l.worker)) gone.push_back(p);
  if (gone.empty()) return false;
  if (!r.patch || r.patch->step != r.tally.step) r.patch = phase::Patching{r.tally.step, 0, {}, {}, {}};
  auto& patch = *r.patch;
  const auto& ranks = applied_->ranks;
  for (const auto& p : gone) {
    patch.lost.insert(p);
    auto at = std::find(ranks.begin(), ranks.end(), p);
    if (at != ranks.end()) patch.damaged.insert(plan::group_of(applied_->plan, uint32_t(at - ranks.begin())).group);
  }
  std::vector<Participant> left;
  for (const auto& p : steps_.participants())
    if (!patch.lost.count(p)) left.push_back(p);
  if (left.empty()) {
    r.patch.reset();
    return false;
  }
  recovery_begins(l.cause);
  steps_.patch(left);
  act::DecidePatch ask{++decisions_, {}, applied_->plan.stacks};
  for (uint32_t g = 0; g < plan::group_count(applied_->plan); ++g)
    ask.alive.push_back(!patch.damaged.count(g) && plan::group_span(applied_->plan, g).count > 0);
  patch.deciding = ask.decision;
  out_.push_back(std::move(ask));
  return true;
}

// "lost 3.0, 5.0 (group 1, 2)": the workers the step lost and their groups (events name them so;
// `sim stacks` reads them back).
std::string Driver::patch_losses(const phase::Patching& p) {
  std::string lost, groups;
  for (const auto& w : p.lost) lost += (lost.empty() ? "" : ", ") + participant_name(w);
  for (uint32_t g : p.damaged) groups += (groups.empty() ? "" : ", ") + std::to_string(g);
  return "lost " + lost + " (group " + groups + ")";
}

bool Driver::vote_answers_patch(const phase::Running& r, const wire::StepVote& v) {
  if (!r.patch || r.patch->step != v.step) return v.patch == 0;
  return !r.patch->deciding && v.patch == r.patch->sent;
}

Driver::Next Driver::on_patch_decided(const Event& e) {
  const auto& d = std::get<in::PatchDecided>(e);
  auto& r = std::get<phase::Running>(state_);
  if (!r.patch || r.patch->deciding != d.decision) return std::nullopt;  // superseded by a later loss
  r.patch->deciding.reset();
  if (!steps_.in_flight()) return std::nullopt;
  const std::string cannot = "step " + std::to_string(r.tally.step) + " cannot be patched: " + patch_losses(*r.patch) + ": ";
  if (!d.stacks)
    return step_outcome(r, steps_.abort(cannot + "the redundancy policy failed: " + d.stacks.error().message()));
  if (d.stacks->wipeout)
    return step_outcome(r, steps_.abort(cannot + "a shard type has no surviving group hosting it (wiped out)"));
  return send_patch(r, *d.stacks, d.decided_by);
}

// Each dropped group's shard types go to the group the policy's stacks give them to; that group
// must still be in the step.
Driver::Next Driver::send_patch(phase::Running& r, const plan::ShardStacks& stacks, const std::string& decided_by) {
  const plan::Plan& plan = applied_->plan;
  const uint32_t G = plan::group_count(plan);
  auto& patch = *r.patch;
  wire::StepPatch p{steps_.epoch(), r.tally.step, applied_->number(), ++patch.sent, {}, {}, {}, ""};
  p.extra.assign(G, {});
  std::string moved;
  for (uint32_t g : patch.damaged) {
    p.damaged.push_back(g);
    if (g >= plan.stacks.assignment.size()) continue;
    for (uint32_t t : plan.stacks.assignment[g]) {
      uint32_t to = G;
      for (uint32_t h = 0; h < stacks.assignment.size() && to == G; ++h)
        if (std::count(stacks.assignment[h].begin(), stacks.assignment[h].end(), t)) to = h;
      if (to == G || patch.damaged.count(to))
        return step_outcome(r, steps_.abort("step " + std::to_string(r.tally.step) + " cannot be patched: " +
                                            patch_losses(patch) + ": the redundancy policy gives shard type " +
                                            std::to_string(t) + " to no group still in the step"));
      p.extra[to].push_back(t);
      moved += (moved.empty() ? "" : ", ") + std::string("type ") + std::to_string(t) + " -> group " + std::to_string(to);
    }
  }
  std::vector<Participant> left;
  for (uint32_t i = 0; i < applied_->ranks.size(); ++i)
    if (!patch.lost.count(applied_->ranks[i])) {
      p.ranks.push_back(i);
      left.push_back(applied_->ranks[i]);
    }
  p.reason = patch_losses(patch) + ": " + (moved.empty() ? "no shard type to move" : moved) + "; " +
             std::to_string(p.ranks.size()) + " ranks synchronise (stacks by " + decided_by + ", depth " +
             std::to_string(stacks.depth()) + ")";
  r.tally.ce = 0, r.tally.tokens = 0, r.tally.compute_ms = 0;
  r.tally.voted.clear();
  r.tally.validation.clear();
  std::fill(r.tally.loads.begin(), r.tally.loads.end(), 0);
  note("patch", "step " + std::to_string(r.tally.step) + " patch " + std::to_string(p.patch) + ": " + p.reason,
       act::Level::warn);
  recovery_->patched = true;
  send(left, std::move(p));
  return std::nullopt;
}

}  // namespace sal::job
