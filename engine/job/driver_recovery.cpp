// driver_recovery.cpp — the job driver's recovery half (see driver.h): the restoring rungs of the
// ladder (start_restore), the reconciliation of a job resumed after a controller restart, the
// bookkeeping of each recovery from a loss to the next committed step, what the agents report of
// the sparse snapshots they hold, and the dense snapshots the dense rung restores from (their
// copy bandwidth measured for the checkpoint policy).
#include <algorithm>
#include <cstdio>

#include "core/strings.h"
#include "job/driver.h"

namespace sal::job {

// A resumed job: the journaled plan's ranks come back (at most the join window is waited for);
// each is brought to the committed state or, if it cannot be, treated as a new worker; whatever
// step was in flight is discarded (its data plane is spent); then the plan is put in force again
// when every rank came back holding the committed state, else the survivors re-plan.
Driver::Next Driver::on_reconcile(const Event& e) {
  auto& r = std::get<phase::Reconciling>(state_);
  if (auto* t = std::get_if<in::TimerFired>(&e); t && t->timer == Timer::gate) r.join.over = true;
  return reconcile(r);
}

Driver::Next Driver::reconcile(phase::Reconciling& r) {
  const auto& ranks = applied_->ranks;
  size_t back = size_t(std::count_if(ranks.begin(), ranks.end(), [&](const Participant& p) { return contains(view_.ready, p); }));
  if (back < ranks.size() && !window_over(r.join, cfg_.join_window_ms)) return std::nullopt;
  cancel(Timer::gate);
  auto stale = bring_up_to_date();
  uint64_t committed = steps_.committed();
  std::vector<Participant> returned;
  for (const auto& p : ranks)
    if (contains(view_.ready, p)) returned.push_back(p);
  abort_ranks(returned, committed, "the controller restarted: the step in flight is discarded");
  plane_spent_ = true;
  planes_intact_ = false;
  auto sorted_ranks = ranks;
  std::sort(sorted_ranks.begin(), sorted_ranks.end());
  const bool keep = stale.empty() && view_.ready == sorted_ranks;  // the same workers, every one up to date
  std::string why = "resume at step " + std::to_string(committed) + ": " + std::to_string(back) + " of " +
                    std::to_string(ranks.size()) + " ranks of plan " + std::to_string(applied_->number()) + " back";
  note("resumed", why + (stale.empty() ? "" : ", " + std::to_string(stale.size()) + " of them without the committed state"));
  recovery_begins("the controller restarted");
  return start_plan(why, false, keep);
}

// Each rank back holds the committed steps, or one fewer with the last step's gradients waiting
// for its commit (the controller died between journaling the commit and every rank hearing it):
// that rank applies it now. A rank holding anything else cannot be trusted with the committed
// state: it takes part as a new worker (its units come from the others). Returns those.
std::vector<Participant> Driver::bring_up_to_date() {
  uint64_t committed = steps_.committed();
  std::vector<Participant> stale;
  for (auto& r : applied_->ranks) {
    if (!contains(view_.ready, r)) continue;
    auto it = view_.held.find(r);
    Holding h = it == view_.held.end() ? Holding{} : it->second;
    if (h.steps == committed) continue;
    bool missed_commit = committed > 0 && h.steps + 1 == committed && h.pending == committed - 1 &&
                         h.pending_epoch == steps_.epoch();
    if (missed_commit) {
      send({r}, wire::StepCommit{steps_.epoch(), committed - 1});
      note("reconciled", "worker " + participant_name(r) + " applies step " + std::to_string(committed - 1) +
                             ", committed before the controller restarted");
      continue;
    }
    note("reconciled", "worker " + participant_name(r) + " holds " + std::to_string(h.steps) + " steps, the journal " +
                           std::to_string(committed) + ": it takes part as a new worker", act::Level::warn);
    stale.push_back(r);
    r = Participant{kNoNode, r.index};  // its old rank's units count as lost
  }
  return stale;
}

// The dense and seed rungs: every rank loads what the plan gives it from the newest complete
// snapshot (or the seed), and the steps after the snapshot are run again.
Driver::Next Driver::start_restore(const PlanRecord& rec, const WorkerChoice& choice) {
  uint64_t committed = steps_.committed();
  if (choice.rung == Rung::rebuild) return start_rebuild(rec, choice);
  if (choice.rung == Rung::sparse) {
    if (auto w = peer_window(committed)) return start_sparse_restore(rec, choice, *w);
    WorkerChoice next = choice;  // the window went while the plan was decided
    next.rung = snapshots_ && snapshots_->latest() ? Rung::dense : Rung::seed;
    return start_restore(rec, next);
  }
  const ckpt::Snapshot* snap =
      choice.rung == Rung::dense && snapshots_ && snapshots_->latest() ? &*snapshots_->latest() : nullptr;
  uint64_t to = snap ? snap->step : 0;
  std::string from = snap ? "the snapshot of step " + std::to_string(to) + " (" + snap->dir + ")" : "the seed (step 0)";
  uint64_t number = rec.plan.version;
  auto sw = switch_plan(applied_, choice.use, rec.plan, 0);  // ranks only: nothing moves
  if (!sw) return fail_job("plan " + std::to_string(number) + ": " + sw.error().message());
  // after a failed restore from peers, the steps run again count from where the job was before it
  const uint64_t before = std::max(committed, peers_.replaced());
  const uint64_t rerun = before > to ? before - to : 0;
  if (!recovery_) recovery_ = new_recovery(choice.why);
  steps_.restore_to(to);
  out_.push_back(act::Journal{rec::Rewind{to}, true});
  out_.push_back(act::StepsLost{rerun});
  recovery_->restored = true;
  recovery_->source = snap ? "disk" : "seed";
  recovery_->rerun = recovery_->committed > to ? recovery_->committed - to : 0;
  std::string detail = "restoring " + from + " on " + std::to_string(choice.use.size()) + " workers because " +
                       choice.why + "; " + steps_run_again(to, before);
  if (cfg_.relaunch) detail += "; every worker of the plan is relaunched first (train.restart)";
  note("restore_begun", detail, act::Level::warn);
  out_.push_back(act::Phase{"restore", choice.why});
  return begin_restore_switch(rec, *sw, view_.epoch, to, {choice.rung, from, snap ? snap->dir : "", {}, cfg_.relaunch},
                              choice.why);
}

// "7 committed steps (110..117) will run again", or, for a snapshot ahead of the committed steps
// (written before an earlier rollback), that training goes on from it.
std::string Driver::steps_run_again(uint64_t to, uint64_t committed) {
  if (to > committed)
    return "it is ahead of the " + std::to_string(committed) + " committed steps (a state the job reached before it "
           "rolled back): training goes on from step " + std::to_string(to) + ", no step runs again";
  return std::to_string(committed - to) + " committed steps (" + std::to_string(to) + ".." + std::to_string(committed) +
         ") will run again";
}

// The sparse rung: every rank loads its units from the window in the agents' memory and replays
// it; training goes on with the iteration after the window's first (the state slot 0 holds), and
// the window's later iterations are replayed with the operators not yet loaded in full frozen, the
// steps after it re-executed. Nothing committed is lost, unless the restore fails
// (sparse_restore_failed) and the job falls to the dense snapshot.
Driver::Next Driver::start_sparse_restore(const PlanRecord& rec, const WorkerChoice& choice, const PeerWindow& w) {
  uint64_t committed = steps_.committed();
  uint64_t to = w.from + 1;
  auto sw = switch_plan(applied_, choice.use, rec.plan, 0);  // ranks only: nothing moves
  if (!sw) return fail_job("plan " + std::to_string(rec.plan.version) + ": " + sw.error().message());
  if (!recovery_) recovery_ = new_recovery(choice.why);
  steps_.restore_to(to);
  out_.push_back(act::Journal{rec::Rewind{to}, true});
  peers_.restore_begun(committed);
  recovery_->restored = true;
  recovery_->source = "peers";
  recovery_->rerun = recovery_->committed > to ? recovery_->committed - to : 0;
  std::string from = "the sparse window of iterations " + std::to_string(w.from) + ".." + std::to_string(w.to) +
                     " held by " + std::to_string(w.holders.size()) + " nodes";
  note("restore_begun",
       "restoring " + from + " on " + std::to_string(choice.use.size()) + " workers because " + choice.why + "; " +
           std::to_string(w.to - w.from) + " iterations replayed with frozen operators, then " +
           std::to_string(committed > w.to + 1 ? committed - w.to - 1 : 0) + " re-executed (" + std::to_string(to) + ".." +
           std::to_string(committed) + "); no committed step is lost",
       act::Level::warn);
  out_.push_back(act::Phase{"restore", choice.why});
  return begin_restore_switch(rec, *sw, view_.epoch, to, {Rung::sparse, from, "", w}, choice.why);
}

// A dense restore a worker could not read its snapshot for (a unit file of it damaged, truncated,
// gone or of another step: PlanReady.snapshot_unreadable, with the file in its detail): the
// snapshot is forgotten, here and in the journal, so the restore asked for next takes the one
// before it, or the seed. Kept on disk, for a look at it.
void Driver::dense_restore_failed(const phase::Switching& p, const std::string& why) {
  if (p.restore_dir.empty() || !p.snapshot_unreadable) return;
  if (!snapshots_ || !snapshots_->forget(p.restore_dir)) return;
  out_.push_back(act::Journal{rec::SnapshotDrop{p.restore_dir}, true});
  const auto& next = snapshots_->latest();
  note("snapshot_damaged", "the restore from " + p.restore_from + " failed (" + why + "): that snapshot is no longer " +
                               "restored from (left on disk); the next restore takes " +
                               (next ? "the snapshot of step " + std::to_string(next->step) : std::string("the seed")),
       act::Level::warn);
}

void Driver::sparse_restore_failed(const phase::Switching& p, const std::string& why) {
  if (!p.restore_window) return;
  peers_.restore_failed(*p.restore_window);
  std::string next = snapshots_ && snapshots_->latest() ? "the dense snapshot on disk" : "the seed";
  note("sparse_restore_failed", "the restore from " + p.restore_from + " failed (" + why + "); falling back to " + next +
                                    " unless another window serves",
       act::Level::warn);
}

// Every rank of the plan loads its units from `source.dir` (the seed's when empty) and training
// goes on with step `step`.
Driver::Next Driver::begin_restore_switch(const PlanRecord& rec, const PlanSwitch& sw, Epoch epoch, uint64_t step,
                                          const RestoreSource& source, const std::string& why) {
  phase::Switching p{rec.plan.version, step, sw.ranks, rec.plan, sw, {}, why, now_ns_};
  p.restore = source.rung;
  p.restore_from = source.what;
  p.restore_dir = source.dir;
  auto u = plan_update(epoch, step, sw, rec.plan);
  u.restore = true;
  u.restore_dir = source.dir;
  u.relaunch = source.relaunch;
  if (source.window) {
    p.restore_window = source.window->from;
    p.restore_to = source.window->to;
    u.restore_window = int64_t(source.window->from);
    u.restore_holders = source.window->holders;
    u.restore_keeps = source.window->from == source.window->to && repairs_.empty();
  }
  return begin_switch(std::move(p), std::move(u));
}

// The first plan of a job resumed from a checkpoint (until one is in force): every unit of every
// rank comes from the checkpoint, and the steps go on from the one it was written after.
Driver::Next Driver::start_resume(const PlanRecord& rec, const phase::Deciding& d) {
  const ResumeFrom& from = *cfg_.resume_from;
  const uint64_t number = rec.plan.version;
  auto sw = switch_plan(applied_, d.choice.use, rec.plan, 0);  // ranks only: nothing moves
  if (!sw) return fail_job("plan " + std::to_string(number) + ": " + sw.error().message());
  steps_.resume(from.step, d.epoch);
  const std::string what = "the checkpoint of step " + std::to_string(from.step) + " (" + from.dir + ")";
  note("resume_begun", "restoring " + what + " on " + std::to_string(d.choice.use.size()) + " workers; training goes on "
                       "with step " + std::to_string(from.step));
  return begin_restore_switch(rec, *sw, d.epoch, from.step, {Rung::dense, what, from.dir, {}}, d.why);
}

// A recovery that begins now: under losses back to back one spans every plan until a step commits,
// and the steps its restores run again count from those committed when it began (seen on the P3
// trace: four losses in a second, the first restore rewound 14 to 10, the later ones 10 to 10, and
// the record said 0 steps run again).
Driver::Recovery Driver::new_recovery(const std::string& cause) const {
  Recovery r{cause, now_ns_};
  r.committed = steps_.committed();
  return r;
}

// The earliest cause counts: a recovery that is interrupted by another loss goes on. Steps that a
// plan of it had begun computing when the new loss came are counted apart (interrupted_ns).
void Driver::recovery_begins(const std::string& cause) {
  if (!recovery_) {
    recovery_ = new_recovery(cause);
    return;
  }
  if (recovery_->computing_since_ns) recovery_->interrupted_ns += now_ns_ - recovery_->computing_since_ns;
  recovery_->computing_since_ns = 0;
}

// A plan of the recovery in progress went into force: its steps are training, not the engine's
// recovering (until they commit, or a later loss aborts them).
void Driver::recovery_computing() {
  if (recovery_) recovery_->computing_since_ns = now_ns_;
}

// The record's `seconds` are the engine's: the time spent waiting for capacity and computing steps
// that later losses aborted are given apart.
void Driver::recovery_ends(uint64_t step) {
  if (!recovery_) return;
  double since_s = double(recovery_->since_ns - cfg_.origin_ns) / 1e9;
  double capacity_s = double(recovery_->capacity_ns) / 1e9;
  double interrupted_s = double(recovery_->interrupted_ns) / 1e9;
  RecoveryRecord r{recovery_->cause, recovery_->restored ? "restore" : recovery_->patched ? "patch" : "elastic", since_s,
                   std::max(0.0, now_s() - since_s - capacity_s - interrupted_s), step, recovery_->source, recovery_->rerun,
                   capacity_s, interrupted_s};
  measured_.recovered(r);
  out_.push_back(act::RecoveryDone{r});
  std::vector<std::string> apart;
  if (recovery_->capacity_ns) apart.push_back(ms_text(recovery_->capacity_ns) + " of it waiting for capacity");
  if (recovery_->interrupted_ns)
    apart.push_back(ms_text(recovery_->interrupted_ns) + " computing steps that later losses aborted");
  note("recovered", "training resumed: step " + std::to_string(step) + " committed " +
                        std::to_string((now_ns_ - recovery_->since_ns) / 1'000'000) + " ms after " + recovery_->cause +
                        (apart.empty() ? "" : " (" + join(apart, ", ") + ")"));
  recovery_.reset();
}

// After step s-1 commits, the state is that of "step s" (what a restore resumes from).
// Degraded steps (`lost`: the ranks their patch lost) snapshot without those ranks: the others
// write the units those would have.
void Driver::maybe_snapshot(const std::set<Participant>& lost) {
  uint64_t at = steps_.committed();
  if (!snapshots_ || at % uint64_t(cfg_.checkpoint_every) != 0 || !applied_) return;
  if (snapshots_->latest() && snapshots_->latest()->step >= at) return;  // re-executed after a restore
  wire::SaveCheckpoint save{"", at, applied_->number(), true, {}};
  std::vector<Participant> savers;
  for (uint32_t i = 0; i < applied_->ranks.size(); ++i)
    if (lost.count(applied_->ranks[i]))
      save.absent.push_back(i);
    else
      savers.push_back(applied_->ranks[i]);
  save.dir = snapshots_->begin(at, savers);
  send(savers, std::move(save));
}

// What an agent holds of the sparse snapshots, and what it refused (said now and then).
Driver::Next Driver::on_slices(const Event& e) {
  if (auto said = peers_.report(std::get<in::Slices>(e).report)) note("slice_refused", *said, act::Level::warn);
  return std::nullopt;
}

void Driver::snapshot_answered(const wire::SaveDone& d) {
  if (!snapshots_) return;
  ckpt::SnapshotBook::Answer a{d.written, d.bytes, d.copy_ms, d.ms};
  auto done = snapshots_->answer({d.node_id, d.index}, d.step, d.ok, a, d.detail);
  if (!done) return note("snapshot_failed", done.error().message(), act::Level::warn);
  if (!*done) return;
  const ckpt::Snapshot& s = (*done)->snapshot;
  out_.push_back(act::SnapshotComplete{s});
  out_.push_back(act::Journal{rec::Snapshot{s}});
  for (const auto& dir : (*done)->dropped) {
    out_.push_back(act::SnapshotDrop{dir});
    out_.push_back(act::Journal{rec::SnapshotDrop{dir}});
  }
  measured_.copied(double(s.bytes), s.slowest_copy_ms);
  char pause[32];
  std::snprintf(pause, sizeof pause, "%.1f", s.slowest_copy_ms);
  note("snapshot_saved", "dense snapshot of step " + std::to_string(s.step) + " complete: " + std::to_string(s.units) +
                             " units in " + s.dir + " (training paused " + pause +
                             " ms to copy it; written in the background, slowest worker " +
                             std::to_string(int64_t(s.slowest_ms)) + " ms)",
       act::Level::info, true);
  if (auto behind = measured_.disk_behind(s, cfg_.checkpoint_every)) note("snapshot_slow", *behind, act::Level::warn);
}

void Driver::drop_snapshots_of_lost() {
  if (!snapshots_) return;
  for (uint64_t s : snapshots_->drop_waiting_on_lost(view_.ready))
    note("snapshot_dropped", "the snapshot of step " + std::to_string(s) +
                                 " cannot complete: units whose every writer left are missing",
         act::Level::info, true);
}

}  // namespace sal::job
