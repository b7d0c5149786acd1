// driver_rebuild.cpp — the job driver's rebuild rung (ladder.h): experts that lost every holder are
// rebuilt alone by their new holders — each from its full copy in the newest window of sparse
// snapshots in the agents' memory, then its own updates replayed from the upstream logs every rank
// put with its slices (MoEtion's upstream logging, model/expert_replay.h) — while the survivors
// re-plan as after any loss. Nobody rolls back and no committed step runs again. A rebuild that
// cannot be applied (a log missing or damaged, a copy that fails its checksum) is an event, and the
// ladder goes on to the sparse rung.
#include "job/driver.h"
#include "plan/plan.h"

namespace sal::job {

// Committed steps' gradient norms kept for a rebuild's replay: well past the span of iterations the
// agents keep logs of (three windows' periods).
constexpr size_t kNormsKept = 4096;

void Driver::norm_committed(uint64_t step, double grad_norm) {
  norms_[step] = grad_norm;
  while (norms_.size() > kNormsKept) norms_.erase(norms_.begin());
}

// The rebuild rung applies when what is lost (as lost_state names it over the workers in use) is
// experts only, the workers log (train.expert_logs, sparse snapshots in peers), the plan in force is
// one group and ran every iteration since the newest window that covers the model began (the logs
// of those iterations are all of its ranks'), no replay is in force, and no rebuild of this loss
// failed. Only in the elastic mode: the baselines restore as their systems do.
bool Driver::can_rebuild(const std::vector<std::string>& lost, const std::vector<Participant>& use) const {
  if (cfg_.recovery != "elastic" || !cfg_.expert_logs || cfg_.peer_copies == 0 || rebuild_failed_ || !applied_ ||
      replaying())
    return false;
  if (plan::group_count(applied_->plan) > 1 || lost.empty() || lost != lost_state(applied_, use)) return false;
  if (lost_experts(applied_, use).size() != lost.size()) return false;  // the non-expert units among them
  auto w = peer_window(steps_.committed());
  return w && w->from >= applied_->from_step;
}

namespace {

// What the new holders of the lost experts need: the window's holders of those experts' copies, the
// ranks whose logs they replay (the plan in force's), up to which iteration, and the clip norms.
void rebuild_fields(wire::PlanUpdate& u, const PeerWindow& w, const std::set<plan::LayerExpert>& lost,
                    const AppliedPlan& applied, uint64_t committed, std::vector<double> norms) {
  u.rebuild_window = int64_t(w.from);
  for (const auto& h : w.holders) {
    wire::SliceHolder mine{h.node, {}};
    for (const auto& ref : h.units)
      if (ref.kind == uint8_t(UnitKind::expert) && lost.count({uint32_t(ref.layer), plan::ExpertId(ref.expert)}))
        mine.units.push_back(ref);
    if (!mine.units.empty()) u.rebuild_holders.push_back(std::move(mine));
  }
  u.rebuild_plan = applied.number();
  for (const auto& r : applied.ranks) u.rebuild_ranks.push_back({uint32_t(r.node), r.index});
  u.rebuild_to = committed - 1;
  u.rebuild_norms = std::move(norms);
}

}  // namespace

// The survivors' plan, whose transfers bring every expert a survivor holds; the lost ones are
// rebuilt where the plan places them from the window and the logs of iterations after their copy
// up to the last committed one. Training goes on with the next step.
Driver::Next Driver::start_rebuild(const PlanRecord& rec, const WorkerChoice& choice) {
  const uint64_t committed = steps_.committed();
  const auto lost = lost_experts(applied_, choice.use);
  auto w = peer_window(committed);
  std::vector<double> norms;  // of iterations w->from + 1 .. committed - 1, as the run clipped with them
  for (uint64_t s = w ? w->from + 1 : committed; s < committed; ++s)
    if (auto it = norms_.find(s); it != norms_.end()) norms.push_back(it->second);
  if (!w || lost.empty() || committed == 0 || norms.size() != committed - w->from - 1) {
    // the window went while the plan was decided, or the norms of its iterations are not known here
    // (a controller that restarted since)
    WorkerChoice next = choice;
    next.rung = Rung::sparse;
    return start_restore(rec, next);
  }
  auto sw = switch_plan(applied_, choice.use, rec.plan, committed, lost);
  if (!sw) return fail_job("plan " + std::to_string(rec.plan.version) + ": " + sw.error().message());
  auto u = plan_update(view_.epoch, committed, *sw, rec.plan);
  rebuild_fields(u, *w, lost, *applied_, committed, std::move(norms));
  recovery_begins(choice.why);
  recovery_->restored = true;
  recovery_->source = "logs";
  recovery_->rerun = 0;
  std::string from = "the sparse window of iterations " + std::to_string(w->from) + ".." + std::to_string(w->to) +
                     " held by " + std::to_string(w->holders.size()) + " nodes and the upstream logs up to iteration " +
                     std::to_string(committed - 1);
  note("rebuild_begun", "rebuilding " + std::to_string(lost.size()) + " lost experts (" + choice.why + ") from " + from +
                            " on " + std::to_string(choice.use.size()) + " workers; nobody rolls back, no step runs again",
       act::Level::warn);
  out_.push_back(act::Phase{"rebuild", choice.why});
  phase::Switching p{rec.plan.version, committed, sw->ranks, rec.plan, *sw, {}, choice.why, now_ns_};
  p.restore = Rung::rebuild;
  p.restore_from = from;
  return begin_switch(std::move(p), std::move(u));
}

void Driver::rebuild_failed(const phase::Switching& p, const std::string& why) {
  rebuild_failed_ = true;
  note("rebuild_failed", "the rebuild from " + p.restore_from + " failed (" + why + "); falling back to the sparse rung",
       act::Level::warn);
}

}  // namespace sal::job
