// driver_patch.cpp — the recovery ladder's first rung, SPARe's patch (ladder.h, rung 1): a rank of
// a grouped plan (parallel.groups > 1) lost in the middle of a step does not abort the step. The
// groups that lost ranks drop their work of it; the redundancy policy, told which groups are still
// in (act::DecidePatch), decides which of them compute the dropped groups' shard types — or that
// every group up computes a part of each (spread); every surviving rank gets a wire::StepPatch (the
// extra types per group or the spread ones, the dropped groups, the ranks that synchronise over the
// patch's own data plane) and votes again; the step commits with the same global batch. A second
// loss in the same step patches again (from the start: the types are decided anew). Where the
// policy declares a wipe-out (without spreading, a shard type no surviving group hosts; spreading,
// no group up), or nobody is left, the step aborts and the next rungs recover as before.
//
// After a patched step commits, the redundancy policy's after_patch decides. Degraded steps
// (phase::Degraded) keep the patch's arrangement — the damaged groups out (their ranks only
// synchronise, to stay in step), their shard types computed as the patch said, over the patch's
// data plane, already connected — until the next plan: workers joining (replacements) or leaving, a
// rebalance, a wanted re-plan ("degraded"), or until they have cost what a plan switch does
// against a regrouped plan ("cheaper", which also regroups at once where the damaged groups'
// survivors would sit them out at a cost sure to exceed a switch). "regroup" re-plans the
// survivors at the boundary. A loss in a degraded step patches it again with every damaged group
// out. After a spreading patch, a damaged group whose ranks left still hold every expert rejoins
// the degraded steps (StepPatch.rejoin): its survivors compute, so they sit nothing out.
#include <algorithm>

#include "job/driver.h"

namespace sal::job {
namespace {

// "type 1 spread over groups up 0, 2, 3" for a patch's spread types (each group up computes a
// part, while the type's sequences leave every rank of them one: runtime/groups.h).
std::string spread_text(const std::vector<uint32_t>& types, uint32_t groups, const std::set<uint32_t>& damaged) {
  std::string t, up;
  for (uint32_t x : types) t += (t.empty() ? "" : ", ") + std::to_string(x);
  for (uint32_t g = 0; g < groups; ++g)
    if (!damaged.count(g)) up += (up.empty() ? "" : ", ") + std::to_string(g);
  return std::string(types.size() > 1 ? "types " : "type ") + t + " spread over groups up " + up;
}

// "a regrouped plan's step (67 ms: the 50 ms before x 4 / 3 ranks)".
std::string regroup_text(double normal_ms, double regroup_ms, size_t before, size_t left) {
  return "a regrouped plan's step (" + ms_text(int64_t(regroup_ms * 1e6)) + ": the " +
         ms_text(int64_t(normal_ms * 1e6)) + " before x " + std::to_string(before) + " / " + std::to_string(left) +
         " ranks)";
}

// The ranks of group `g` among `left` (plan positions, ascending).
std::vector<uint32_t> group_left(const plan::Plan& plan, uint32_t g, const std::vector<uint32_t>& left) {
  const plan::GroupSpan s = plan::group_span(plan, g);
  std::vector<uint32_t> out;
  for (uint32_t pos : left)
    if (pos >= s.first && pos < s.first + s.count) out.push_back(pos);
  return out;
}

// The damaged groups whose ranks left hold every expert between them (wire::StepPatch.rejoin): in
// a spreading patch's degraded steps they compute, a group of those ranks, rather than idle.
std::vector<uint32_t> rejoining_groups(const plan::Plan& plan, const std::set<uint32_t>& damaged,
                                       const std::vector<uint32_t>& left) {
  std::vector<std::vector<std::vector<uint32_t>>> counts;
  for (const auto& layer : plan.layers) counts.push_back(plan::replica_counts(layer, plan.experts));
  std::vector<uint32_t> out;
  for (uint32_t g : damaged) {
    auto ranks = group_left(plan, g, left);
    if (!ranks.empty() && !plan::missing_expert(counts, ranks)) out.push_back(g);
  }
  return out;
}

// "group 1 computes on with its 1 rank left".
std::string rejoin_text(const plan::Plan& plan, const std::vector<uint32_t>& rejoin, const std::vector<uint32_t>& left) {
  std::string t;
  for (uint32_t g : rejoin) {
    const size_t n = group_left(plan, g, left).size();
    t += (t.empty() ? "group " : ", group ") + std::to_string(g) + " computes on with its " + std::to_string(n) +
         (n == 1 ? " rank left" : " ranks left");
  }
  return t;
}

}  // namespace

bool Driver::try_patch(phase::Running& r, const in::Lost& l) {
  if (!steps_.in_flight() || plan::group_count(applied_->plan) <= 1 || replaying()) return false;
  std::vector<Participant> gone;
  for (const auto& p : steps_.participants())
    if (p.node == l.node && (!l.worker || p.index == *l.worker)) gone.push_back(p);
  if (gone.empty()) return false;
  if (!r.patch || r.patch->step != r.tally.step) {
    r.patch = phase::Patching{r.tally.step, 0, {}, {}, {}, {}, plan::AfterPatch::cheaper};
    if (r.degraded) r.patch->lost = r.degraded->lost, r.patch->damaged = r.degraded->damaged;
  }
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

// The patched step committed: the steps after it train on degraded, or the survivors re-plan now
// (the redundancy policy's after_patch).
void Driver::after_patched_step(phase::Running& r) {
  const phase::Patching p = std::move(*r.patch);  // (r.patch is reset below)
  const std::string head = "step " + std::to_string(p.step) + " committed without " + std::to_string(p.lost.size()) +
                           " lost worker(s), patched " + std::to_string(p.sent) + " time(s); ";
  std::string groups;
  for (uint32_t g : p.damaged) groups += (groups.empty() ? "" : ", ") + std::to_string(g);
  plane_spent_ = true;  // the plan's cross-group plane: the patch's replaces it
  out_.push_back(act::Journal{rec::Patched{1}});  // the run's count goes on across a controller's restart
  const double normal_ms = measured_.facts().iteration_s * 1e3;
  const double regroup_ms = normal_ms * double(applied_->ranks.size()) / double(std::max<size_t>(p.left.size(), 1));
  const std::string switch_text =
      measured_.switch_s() > 0 ? ms_text(int64_t(measured_.switch_s() * 1e9)) : "none measured yet";
  const std::string until = p.after == plan::AfterPatch::degraded
                                ? "until the next plan (workers joining or leaving, a rebalance)"
                                : "while they lose less than a plan switch (" + switch_text + ") against " +
                                      regroup_text(normal_ms, regroup_ms, applied_->ranks.size(), p.left.size());
  // (regrouping, the step's lost ranks are still left out of what happens before the next plan)
  r.degraded = phase::Degraded{p.step, p.sent, p.lost, p.damaged, p.left, p.after, normal_ms, regroup_ms, 0, 0, p.rejoin};
  r.patch.reset();
  if (p.after == plan::AfterPatch::regroup) {
    note("step_patched", head + "the redundancy policy regroups at once: the survivors re-plan next");
    return regroup("regroup after patched step " + std::to_string(p.step));
  }
  if (p.after == plan::AfterPatch::cheaper) {
    if (auto why = idle_survivors_cost(p, normal_ms, regroup_ms); !why.empty()) {
      note("step_patched", head + why + ": the survivors regroup at once");
      return regroup("regroup after patched step " + std::to_string(p.step));
    }
  }
  std::vector<uint32_t> left;  // the patch's ranks as plan positions
  for (uint32_t i = 0; i < applied_->ranks.size(); ++i)
    if (!p.lost.count(applied_->ranks[i])) left.push_back(i);
  const std::string rejoined = p.rejoin.empty() ? "" : " (" + rejoin_text(applied_->plan, p.rejoin, left) + ")";
  note("step_patched", head + "training on degraded (" + plan::after_patch_name(p.after) + "): group(s) " + groups +
                           " out, their shard types computed by the others as patch " + std::to_string(p.sent) +
                           " said" + rejoined + ", " + std::to_string(p.left.size()) + " ranks, " + until);
}

// Under "cheaper", whether degraded steps are sure to lose more than a plan switch before the next
// re-plan in sight: the damaged groups' surviving workers sit them out (they only synchronise), so
// each degraded step runs the batch on fewer workers than a regrouped plan would, about
// normal x ranks x (1 / computing - 1 / left) longer. "" where none sits out (the whole group was
// lost) or the re-plan in sight comes first; else why the survivors regroup at once.
std::string Driver::idle_survivors_cost(const phase::Patching& p, double normal_ms, double regroup_ms) const {
  size_t idle = 0;
  for (uint32_t i = 0; i < applied_->ranks.size(); ++i) {
    const uint32_t g = plan::group_of(applied_->plan, i).group;
    if (!p.lost.count(applied_->ranks[i]) && p.damaged.count(g) && !std::count(p.rejoin.begin(), p.rejoin.end(), g)) ++idle;
  }
  const size_t computing = p.left.size() - std::min(idle, p.left.size());
  if (idle == 0 || computing == 0) return "";
  const double penalty_ms = normal_ms * double(applied_->ranks.size()) / double(computing) - regroup_ms;
  const double switch_ms = measured_.switch_s() * 1e3;
  const auto left = steps_to_replan();
  if (left && penalty_ms * double(*left) <= switch_ms) return "";
  const std::string over = regroup_text(normal_ms, regroup_ms, applied_->ranks.size(), p.left.size());
  const std::string when = left ? ", more than a plan switch (" + ms_text(int64_t(switch_ms * 1e6)) + ") in the " +
                                      std::to_string(*left) + " steps to the next re-plan"
                                : " with no re-plan in sight";
  return std::to_string(idle) + " worker(s) of the damaged group(s) would sit degraded steps out, each step about " +
         ms_text(int64_t(penalty_ms * 1e6)) + " over " + over + when;
}

// A degraded step committed. Degraded steps end in a plan switch whatever happens (a join, a leave,
// a rebalance, the regroup), so they pay only where that switch is one the job makes anyway. What a
// degraded step loses is measured against the step a regrouped plan would run — fewer workers than
// before the patch, so not the steps before it: those times the plan's ranks over the ranks left
// (the work spread evenly over the workers left). Under "cheaper": when the steps to the next
// re-plan in sight (a rebalance, the job's end) would lose less than a switch costs, at the penalty
// measured so far, the job stays degraded; otherwise, as a replacement may come at any step, the
// survivors regroup once the degraded steps have lost a switch's cost (ski rental: never more than
// twice the better choice in hindsight).
void Driver::degraded_step_committed(phase::Running& r, double step_ms) {
  auto& d = *r.degraded;
  d.steps += 1;
  // (signed: a step quicker than the estimate makes up for a slower one — steps that only scatter
  // around it, as degraded steps with every survivor computing do, lose nothing — but never below 0)
  d.lost_ms = std::max(0.0, d.lost_ms + step_ms - d.regroup_ms);
  if (d.after != plan::AfterPatch::cheaper) return;
  const double switch_ms = measured_.switch_s() * 1e3;
  const std::string lost = std::to_string(d.steps) + " degraded steps since step " + std::to_string(d.step) + " lost " +
                           ms_text(int64_t(d.lost_ms * 1e6)) + " against " +
                           regroup_text(d.normal_ms, d.regroup_ms, applied_->ranks.size(), d.ranks.size()) +
                           "; a plan switch costs " + ms_text(int64_t(switch_ms * 1e6));
  if (auto left = steps_to_replan(); left && d.lost_ms / d.steps * double(*left) <= switch_ms) return;
  if (d.lost_ms >= switch_ms) regroup(lost + ": the survivors regroup");
}

// Steps until the plan in force is re-planned anyway (the next rebalance, or the job's last step);
// none when neither is set.
std::optional<uint64_t> Driver::steps_to_replan() const {
  std::optional<uint64_t> left;
  const uint64_t done = steps_.committed();
  if (cfg_.rebalance_every > 0) {
    const uint64_t since = done - std::min(done, applied_->from_step);
    left = uint64_t(cfg_.rebalance_every) - std::min<uint64_t>(since, uint64_t(cfg_.rebalance_every));
  }
  if (cfg_.max_steps > 0) {
    const uint64_t to_end = uint64_t(cfg_.max_steps) - std::min<uint64_t>(done, uint64_t(cfg_.max_steps));
    left = left ? std::min(*left, to_end) : to_end;
  }
  return left;
}

void Driver::regroup(const std::string& why) {
  note("regroup", why);
  wanted_ = Wanted{why, wanted_ && wanted_->with_loads};
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
  // the patch this one replaces is over: a rank still waiting in its rendezvous for a rank lost
  // since (or coming to it late) fails at once and takes this one, not after the store's timeout
  if (patch.sent > 1)
    out_.push_back(act::EraseKeys{applied_->number(), true, wire::patch_keys(r.tally.step, patch.sent - 1)});
  p.extra.assign(G, {});
  std::string moved;
  for (uint32_t g : patch.damaged) {
    p.damaged.push_back(g);
    if (g >= plan.stacks.assignment.size()) continue;
    if (stacks.spread) {
      for (uint32_t t : plan.stacks.assignment[g]) p.spread.push_back(t);
      continue;
    }
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
  if (!p.spread.empty()) moved = spread_text(p.spread, G, patch.damaged);
  std::vector<Participant> left;
  std::vector<uint32_t> lost, node_of_rank;
  for (uint32_t i = 0; i < applied_->ranks.size(); ++i) {
    node_of_rank.push_back(uint32_t(applied_->ranks[i].node));
    if (patch.lost.count(applied_->ranks[i])) {
      lost.push_back(i);
      continue;
    }
    p.ranks.push_back(i);
    left.push_back(applied_->ranks[i]);
  }
  p.slice_peers = slice_peers(node_of_rank, plan, lost);
  if (!p.spread.empty()) p.rejoin = rejoining_groups(plan, patch.damaged, p.ranks);
  if (!p.rejoin.empty()) moved += "; " + rejoin_text(plan, p.rejoin, p.ranks) + " in the degraded steps";
  p.reason = patch_losses(patch) + ": " + (moved.empty() ? "no shard type to move" : moved) + "; " +
             std::to_string(p.ranks.size()) + " ranks synchronise (stacks by " + decided_by + ", depth " +
             std::to_string(stacks.depth()) + "; after it: " + plan::after_patch_name(stacks.after_patch) + ")";
  patch.left = left;
  patch.rejoin = p.rejoin;
  patch.after = stacks.after_patch;
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
