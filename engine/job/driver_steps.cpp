// driver_steps.cpp — the job driver's running phase (see driver.h, driver_phases.h): the step
// boundary (re-plan, rebalance, the next step, the end), votes and losses, commits and aborts;
// and the end of the job: the final checkpoint, done or failed.
#include <algorithm>

#include "job/driver.h"

namespace sal::job {

// After an aborted step whose cause is not seen yet (a peer's collective failed before the loss
// was noticed), the most the driver waits before planning again, for the same reason. It plans at
// once when a rank of the step is seen gone (usually within 1-2 ms of a kill: a pidfd, a closed
// socket); this pause was 50 ms of every recovery when it was a fixed wait.
constexpr uint64_t kAbortSettleMs = 50;
// How long the final checkpoint may take.
constexpr uint64_t kSaveTimeoutMs = 120000;
// A final checkpoint whose savers keep dying is given up after this many tries.
constexpr uint32_t kSaveAttempts = 3;

namespace {

std::vector<Participant> sorted(std::vector<Participant> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

// ---------- running ----------

// A plan came into force: the first step boundary under it.
Driver::Next Driver::in_force() {
  phase::Running r;
  Next next = boundary(r);
  return next ? std::move(next) : Next(std::move(r));
}

Driver::Next Driver::on_boundary(const Event&) {
  auto& r = std::get<phase::Running>(state_);
  if (steps_.in_flight()) return std::nullopt;
  return boundary(r);
}

Driver::Next Driver::on_join_batch(const Event&) {
  auto& r = std::get<phase::Running>(state_);
  r.joins.over = true;
  if (steps_.in_flight()) return std::nullopt;
  return boundary(r);
}

// Only between steps under a plan in force: the job ends, a new plan is made, or the next step
// begins.
Driver::Next Driver::boundary(phase::Running& r) {
  uint64_t done = steps_.committed();
  if (cfg_.max_steps > 0 && int64_t(done) >= cfg_.max_steps)
    return start_save("completed " + std::to_string(steps_.committed()) + " steps");
  const auto& ready = view_.ready;
  auto use = sorted(choose(ready, done).use);  // the baselines idle some
  // (degraded steps: the ranks the patch lost are gone already, their recovery recorded)
  const auto& in_use = r.degraded ? r.degraded->ranks : applied_->ranks;
  if (use != sorted(in_use)) {
    size_t joined = 0, left = 0;
    for (const auto& w : ready) joined += !contains(applied_->ranks, w);
    for (const auto& w : in_use) left += !contains(ready, w);
    std::string why = "workers changed: " + std::to_string(joined) + " joined, " + std::to_string(left) + " left" +
                      (r.degraded ? " (degraded since step " + std::to_string(r.degraded->step) + ")" : "");
    if (left > 0 || (!replaying() && join_batch_over(r))) {  // joins wait for a replay to end
      if (left == 0) return start_plan(why);
      recovery_begins(why);
      if (auto until = settle_deadline()) return settle_reports(why, *until);
      return start_plan(why);
    }
  } else {
    r.joins = {};
  }
  if (wanted_ && !replaying()) return start_plan(wanted_->why);
  int64_t every = cfg_.rebalance_every;
  if (every > 0 && !replaying() && done > applied_->from_step && int64_t(done - applied_->from_step) >= every)
    return start_plan("rebalance: " + std::to_string(every) + " steps under plan " + std::to_string(applied_->number()), true);
  if (cfg_.max_steps > 0) begin_step(r);
  return std::nullopt;
}

// Joins wait mesh.join_batch_ms from the first of them; meanwhile training goes on under the plan
// in force (the timer covers a job with no step running).
bool Driver::join_batch_over(phase::Running& r) {
  if (r.joins.since_ns == 0) {
    r.joins = {now_ns_, false};
    if (cfg_.join_batch_ms > 0) arm(Timer::join, uint64_t(cfg_.join_batch_ms));
  }
  return r.joins.over || now_ns_ - r.joins.since_ns >= cfg_.join_batch_ms * 1'000'000;
}

void Driver::begin_step(phase::Running& r) {
  r.patch.reset();
  r.tally = phase::Tally{};
  r.tally.step = steps_.next_step();
  r.tally.loads.assign(size_t(cfg_.model.layers) * size_t(cfg_.model.experts), 0);
  r.tally.begun_ns = now_ns_;
  const auto& ranks = r.degraded ? r.degraded->ranks : applied_->ranks;
  steps_.begin(view_.epoch, ranks);
  shares_.keep_only(applied_->ranks);
  wire::StepBegin b{view_.epoch, r.tally.step, applied_->number(), shares_.for_step(applied_->ranks)};
  if (r.degraded) b.kept_step = r.degraded->step, b.kept_patch = r.degraded->patch;
  send(ranks, std::move(b));
}

Driver::Next Driver::on_vote(const Event& e) {
  const auto& v = std::get<in::Vote>(e).vote;
  auto& r = std::get<phase::Running>(state_);
  Participant p{v.node_id, v.index};
  if (v.ok)
    measured_.sparse_held(p, SparseHolding{v.sparse_bytes, v.sparse_from, v.sparse_to, v.sparse_copy_ms, v.step,
                                                    v.log_bytes, v.sparse_path_cpu_ms},
                          v.sparse_slot_bytes);
  if (!vote_answers_patch(r, v)) return std::nullopt;  // a vote on the step as it was before a patch
  auto& t = r.tally;
  if (v.ok && v.step == t.step && steps_.in_flight() && steps_.participants().count(p) && t.voted.insert(p).second) {
    t.ce += v.ce_sum;
    t.tokens += v.tokens;
    t.aux = v.aux;
    t.grad_norm = v.grad_norm;
    t.lr = v.lr;
    t.compute_ms = std::max(t.compute_ms, v.compute_ms);
    t.times[p] = {v.busy_ms,       v.exchange_ms,   v.sync_ms,        v.update_ms, v.busy_cpu_ms,
                  v.expert_cpu_ms, v.process_cpu_ms, v.tokens, v.expert_rows};
    if (v.loads.size() == t.loads.size())
      for (size_t i = 0; i < v.loads.size(); ++i) t.loads[i] += v.loads[i];
    if (!v.digests.empty()) t.digests[p] = v.digests;
    if (v.val_tokens > 0) t.validation[p] = {v.val_ce_sum, v.val_tokens};
  }
  if (steps_.in_flight() && v.epoch != steps_.epoch())  // a node cut off in an older epoch
    note("stale_vote", "worker " + participant_name(p) + "'s vote for step " + std::to_string(v.step) + " of epoch " +
                           std::to_string(v.epoch) + " refused: the step in flight began in epoch " +
                           std::to_string(steps_.epoch()), act::Level::warn);
  if (digests_disagree(r, v)) return step_outcome(r, steps_.abort(repairs_.abort_reason));  // before any commit
  return step_outcome(r, steps_.vote(p, v.epoch, v.step, v.ok, v.detail));
}

Driver::Next Driver::on_lost(const Event& e) {
  const auto& l = std::get<in::Lost>(e);
  auto& r = std::get<phase::Running>(state_);
  if (try_patch(r, l)) return std::nullopt;
  return step_outcome(r, l.worker ? steps_.lost_worker({l.node, *l.worker}, l.cause) : steps_.lost(l.node, l.cause));
}

Driver::Next Driver::step_outcome(phase::Running& r, StepCoordinator::Outcome o) {
  using O = StepCoordinator::Outcome;
  if (o == O::aborted) return step_aborted(r);
  if (o != O::committed) return std::nullopt;
  // The metrics row first (a resumed controller drops rows past the journal's commits), then the
  // commit, durable before any worker is told: no worker can be ahead of the journal.
  StepRecord rec = step_record(r.tally);
  if (r.degraded) rec.workers = uint32_t(r.degraded->ranks.size());
  const bool record = cfg_.record_routing > 0 && r.tally.step % uint64_t(cfg_.record_routing) == 0;
  out_.push_back(act::StepDone{rec, record ? r.tally.loads : std::vector<uint64_t>{}});
  out_.push_back(act::Journal{rec::Commit{steps_.committed(), steps_.epoch()}, true});
  out_.push_back(act::Send{{}, true, wire::StepCommit{steps_.epoch(), r.tally.step}});
  committed(r, rec);
  return std::nullopt;
}

// The plan's workers that share their host's CPUs, by pool (the view's, job/health.h).
CpuPools Driver::cpu_pools() const {
  CpuPools out;
  for (const Participant& p : applied_->ranks)
    if (auto it = view_.cpu_pools.find(p.node); it != view_.cpu_pools.end()) out[p] = it->second;
  return out;
}

void Driver::announce_abort(const phase::Tally& t) {
  const std::string& why = steps_.last_abort_reason();
  note("step_aborted", "step " + std::to_string(t.step) + ": " + why, act::Level::warn);
  out_.push_back(act::Journal{rec::Aborted{1}});  // the run's count goes on across a controller's restart
  out_.push_back(act::Send{{}, true, wire::StepAbort{steps_.epoch(), t.step, why}});
}

// The step's data plane is spent: the next step needs a plan. A patched step that could not commit
// after all: every worker it lost must be seen gone before the plan is made (the last loss may
// still be in the view), and the recovery is no patch.
Driver::Next Driver::step_aborted(phase::Running& r) {
  std::set<Participant> lost = r.patch ? r.patch->lost : std::set<Participant>{};
  if (recovery_) recovery_->patched = false;
  announce_abort(r.tally);
  const std::string& why = steps_.last_abort_reason();
  recovery_begins("step " + std::to_string(r.tally.step) + " aborted: " + why);
  plane_spent_ = true;
  planes_intact_ = false;
  arm(Timer::retry, kAbortSettleMs);
  phase::Retrying retrying{true, why, sorted(applied_ ? applied_->ranks : std::vector<Participant>{}), r.tally.step,
                           std::move(lost)};
  Next now = cause_seen(retrying);
  return now ? std::move(now) : Next(std::move(retrying));
}

StepRecord Driver::step_record(const phase::Tally& t) const {
  StepRecord r;
  r.step = t.step;
  r.tokens = t.tokens;
  r.ce = t.tokens ? t.ce / double(t.tokens) : 0;
  r.aux = t.aux;
  r.loss = r.ce + r.aux;
  r.val_loss = validation_loss(t.validation);
  r.grad_norm = t.grad_norm;
  r.lr = t.lr;
  r.step_ms = double(now_ns_ - t.begun_ns) / 1e6;
  r.compute_ms = t.compute_ms;
  r.tokens_per_s = r.step_ms > 0 ? double(r.tokens) / (r.step_ms / 1e3) : 0;
  r.workers = uint32_t(applied_->ranks.size());
  r.plan = applied_->number();
  r.time_s = now_s();
  std::vector<std::vector<std::vector<uint32_t>>> placement;
  for (const auto& layer : applied_->plan.layers) placement.push_back(layer.placement);
  r.imbalance = expert_imbalance(t.loads, placement, size_t(cfg_.model.experts), cfg_.dispatch_by_counts);
  return r;
}

void Driver::committed(phase::Running& r, const StepRecord& rec) {
  streak_.steps = 0;
  windows_made_now();  // its sparse slots (settle_deadline)
  planes_intact_ = true;  // (a patched step's: its patch's plane, and the groups' it did not drop)
  recovery_ends(r.tally.step);
  if (r.degraded) degraded_step_committed(r, rec.step_ms);
  if (r.patch) after_patched_step(r);
  measured_.step_committed(r.tally.loads, rec.step_ms / 1e3);
  norm_committed(rec.step, rec.grad_norm);
  // (a plan's first steps connect, allocate and fault pages in: not the workers' speed; degraded
  // steps give some groups more shard types than others by design)
  const bool settled = !r.degraded && r.tally.step >= applied_->from_step + kUnsettledSteps;
  const auto changes = settled ? measured_.worker_times(r.tally.step, r.tally.times, applied_->ranks, cpu_pools())
                               : std::vector<SpeedChange>{};
  for (const auto& c : changes)
    out_.push_back(act::Note{c.slow ? "node_slow" : "node_speed_back", describe(c, measured_.speed().options().window),
                             c.slow ? act::Level::warn : act::Level::info, false, c.who.node});
  consult_health(r.tally.step, !changes.empty());
  maybe_snapshot(r.degraded ? r.degraded->lost : std::set<Participant>{});
  if (cfg_.max_steps > 0 && int64_t(steps_.committed()) >= cfg_.max_steps)
    note("steps_done", std::to_string(steps_.committed()) + " steps committed", act::Level::info, true);
  // The next step begins at the next turn: what the commit's hooks change (a drill's drain, say)
  // and what arrived meanwhile come first.
  out_.push_back(act::Committed{rec.step});
  arm(Timer::soon, 0);
}

// ---------- the end ----------

namespace {

// The first expert of the plan that none of its ranks but `absent` holds, as "layer L expert E";
// "" when the others hold every expert (they hold every dense unit: every rank does).
std::string uncovered_expert(const plan::Plan& p, const std::vector<uint32_t>& absent) {
  for (size_t l = 0; l < p.layers.size(); ++l) {
    std::set<uint32_t> held;
    for (size_t pos = 0; pos < p.layers[l].placement.size(); ++pos)
      if (std::find(absent.begin(), absent.end(), uint32_t(pos)) == absent.end())
        held.insert(p.layers[l].placement[pos].begin(), p.layers[l].placement[pos].end());
    for (const auto& slots : p.layers[l].placement)
      for (uint32_t e : slots)
        if (!held.count(e)) return "layer " + std::to_string(l) + " expert " + std::to_string(e);
  }
  return "";
}

}  // namespace

// The final checkpoint, written by the plan's ranks still here: a rank gone since the plan's last
// step (a patched last step) is left out, and the others write what it would have (each unit by
// one of its holders still here) — unless one of its experts is held by nobody else. A saver lost
// while it writes starts the save again over the ranks left (on_saver_view).
Driver::Next Driver::start_save(const std::string& said, bool after_stop, uint32_t attempt, const std::string& cause) {
  if (cfg_.run_dir.empty() || !applied_) return end_job(said);
  phase::Saving s;
  s.done = said;
  s.after_stop = after_stop;
  s.attempt = attempt;
  s.dir = cfg_.run_dir + "/checkpoint";
  wire::SaveCheckpoint save{s.dir, steps_.committed(), applied_->number(), false, {}};
  std::vector<Participant> savers;
  for (uint32_t i = 0; i < applied_->ranks.size(); ++i)
    if (contains(view_.ready, applied_->ranks[i]))
      savers.push_back(applied_->ranks[i]);
    else
      save.absent.push_back(i);
  if (const std::string lost = uncovered_expert(applied_->plan, save.absent); !lost.empty() || savers.empty())
    return finish_save(s, false, (cause.empty() ? "" : cause + ", and ") + "the workers left hold no copy of " +
                                     (lost.empty() ? "any unit" : lost));
  s.waiting = std::set<Participant>(savers.begin(), savers.end());
  send(savers, std::move(save));
  arm(Timer::plan, kSaveTimeoutMs);
  return s;
}

// The job is over: journaled, and the controller stops it.
Driver::Next Driver::end_job(const std::string& said, const std::string& checkpoint_dir) {
  out_.push_back(act::Journal{rec::End{said}, true});
  out_.push_back(act::StopJob{said});
  return phase::Done{checkpoint_dir};
}

Driver::Next Driver::on_saver_view(const Event&) {
  auto& s = std::get<phase::Saving>(state_);
  for (const auto& p : s.waiting) {
    if (contains(view_.ready, p)) continue;
    std::string why = "worker " + participant_name(p) + " left before it had saved";
    if (s.attempt + 1 >= kSaveAttempts)
      return finish_save(s, false, why + " (after " + std::to_string(kSaveAttempts) + " tries)");
    note("checkpoint_retry", why + ": the workers left write the final checkpoint again", act::Level::warn);
    auto stale = s.stale;
    for (const auto& w : s.waiting) ++stale[w];
    Next next = start_save(s.done, s.after_stop, s.attempt + 1, why);
    if (auto* again = next ? std::get_if<phase::Saving>(&*next) : nullptr) again->stale = std::move(stale);
    return next;
  }
  return std::nullopt;
}

Driver::Next Driver::on_save_timeout(const Event&) {
  return finish_save(std::get<phase::Saving>(state_), false, "not every worker saved in time");
}

Driver::Next Driver::on_saved(const Event& e) {
  const auto& d = std::get<in::Saved>(e).done;
  if (d.snapshot) {
    snapshot_answered(d);
    return std::nullopt;
  }
  auto* s = std::get_if<phase::Saving>(&state_);
  Participant p{d.node_id, d.index};
  if (!s) return std::nullopt;
  if (auto it = s->stale.find(p); it != s->stale.end()) {  // an earlier try's answer
    if (--it->second == 0) s->stale.erase(it);
    return std::nullopt;
  }
  if (!s->waiting.erase(p)) return std::nullopt;
  if (!d.ok) return finish_save(*s, false, "worker " + participant_name(p) + ": " + d.detail);
  s->units += d.units;
  if (!s->waiting.empty()) return std::nullopt;
  return finish_save(*s, true, "");
}

Driver::Next Driver::finish_save(phase::Saving& s, bool ok, const std::string& detail_in) {
  cancel(Timer::plan);
  std::string detail = detail_in;
  if (!ok && snapshots_ && snapshots_->latest())  // what the operator can take instead
    detail += "; the newest dense snapshot, of step " + std::to_string(snapshots_->latest()->step) + ", is in " +
              snapshots_->latest()->dir;
  if (!ok && s.after_stop) {  // the job was stopping anyway: it stops, saying what was not saved
    note("checkpoint_failed", "the final checkpoint was not written: " + detail, act::Level::warn);
    out_.push_back(act::Journal{rec::End{s.done}, true});
    out_.push_back(act::StopJob{s.done + " (the final checkpoint was not written: " + detail + ")"});
    return phase::Done{};
  }
  if (!ok) return fail_job(s.done + ", but the checkpoint was not written: " + detail);
  out_.push_back(act::CheckpointComplete{s.dir, steps_.committed(), s.units});
  note("checkpoint_saved", std::to_string(s.units) + " units of step " + std::to_string(steps_.committed()) + " in " + s.dir);
  return end_job(s.done, s.dir);
}

Driver::Next Driver::fail_job(const std::string& why) {
  cancel(Timer::plan);
  cancel(Timer::retry);
  note("job_failed", why, act::Level::error, true);
  note("", "training cannot go on: " + why, act::Level::error);
  out_.push_back(act::Journal{rec::End{"failed: " + why}, true});
  out_.push_back(act::StopJob{"failed: " + why});
  return phase::Failed{why};
}

}  // namespace sal::job
