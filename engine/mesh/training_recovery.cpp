// training_recovery.cpp — the training driver's recovery half (see training.h): the
// dense-snapshot fallback (start_restore), the asynchronous snapshots it restores from, and the
// bookkeeping of each recovery from a loss to the next committed step.
#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "mesh/controller.h"
#include "mesh/training.h"

namespace sal::mesh {

// The fallback: every rank loads what the plan gives it from the newest complete snapshot (or
// the seed), and the steps after the snapshot are run again.
void Training::start_restore(const PlanRecord& rec, const std::vector<Participant>& use, const std::string& why) {
  uint64_t committed = c_.steps_.committed();
  const Snapshot* snap = snapshots_ && snapshots_->latest() ? &*snapshots_->latest() : nullptr;
  uint64_t to = snap ? snap->step : 0;
  std::string from = snap ? "the snapshot of step " + std::to_string(to) + " (" + snap->dir + ")" : "the seed (step 0)";
  auto sw = switch_plan(applied_, use, rec.plan, 0);  // ranks only: nothing moves
  if (!sw) return fail_job("plan " + std::to_string(rec.number) + ": " + sw.error().message());
  c_.steps_.rewind(to);
  record_.lost(committed - to);
  if (recovery_) recovery_->restored = true;
  else recovery_ = Recovery{why, mono_ns(), true};
  std::string detail = "restoring " + from + " on " + std::to_string(use.size()) + " workers because " + why + "; " +
                       std::to_string(committed - to) + " committed steps (" + std::to_string(to) + ".." +
                       std::to_string(committed) + ") will run again";
  c_.events_.add("restore_begun", kNoNode, c_.membership().epoch(), detail);
  spdlog::warn("{}", detail);
  record_.phase("restore", now_s(), why);
  Pending p{rec.number, to, sw->ranks, rec.plan, *sw, {}, why, mono_ns(), 0};
  p.restore = true;
  p.restore_from = from;
  auto u = plan_update(rec.number, c_.membership().epoch(), to, *sw, rec.plan, store_endpoint_);
  u.restore = true;
  u.restore_dir = snap ? snap->dir : "";
  begin_switch(std::move(p), std::move(u));
}

// The earliest cause counts: a recovery that is interrupted by another loss goes on.
void Training::recovery_begins(const std::string& cause) {
  if (!recovery_) recovery_ = Recovery{cause, mono_ns()};
}

void Training::recovery_ends(uint64_t step) {
  if (!recovery_) return;
  double since_s = double(recovery_->since_ns - c_.started_ns()) / 1e9;
  record_.recovery({recovery_->cause, recovery_->restored ? "restore" : "elastic", since_s, now_s() - since_s, step});
  std::string detail = "training resumed: step " + std::to_string(step) + " committed " +
                       std::to_string(int64_t((mono_ns() - recovery_->since_ns) / 1'000'000)) + " ms after " +
                       recovery_->cause;
  c_.events_.add("recovered", kNoNode, c_.membership().epoch(), detail);
  spdlog::info("{}", detail);
  recovery_.reset();
}

// After step s-1 commits, the state is that of "step s" (what a restore resumes from).
void Training::maybe_snapshot() {
  int64_t every = c_.job().train.checkpoint_every;
  uint64_t at = c_.steps_.committed();
  if (!snapshots_ || every <= 0 || at % uint64_t(every) != 0 || !applied_) return;
  if (snapshots_->latest() && snapshots_->latest()->step >= at) return;  // re-executed after a restore
  std::string dir = snapshots_->begin(at, applied_->ranks);
  wire::SaveCheckpoint msg{dir, at, applied_->number, true};
  std::set<NodeId> nodes;
  for (const auto& p : applied_->ranks) nodes.insert(p.node);
  for (NodeId id : nodes) c_.send_to(c_.membership().find(id)->routing_id, msg);
}

void Training::on_snapshot_done(const wire::SaveDone& d) {
  if (!snapshots_) return;
  auto done = snapshots_->answer({d.node_id, d.index}, d.step, d.ok, d.units, d.copy_ms, d.ms, d.detail);
  if (!done) {
    c_.events_.add("snapshot_failed", kNoNode, c_.membership().epoch(), done.error().message());
    spdlog::warn("{}", done.error().message());
    return;
  }
  if (!*done) return;
  const Snapshot& s = **done;
  c_.events_.add("snapshot_saved", kNoNode, c_.membership().epoch(),
                 "dense snapshot of step " + std::to_string(s.step) + " complete: " + std::to_string(s.units) + " units in " +
                     s.dir + " (training paused " + fmt::format("{:.1f}", s.slowest_copy_ms) +
                     " ms to copy it; written in the background, slowest worker " + std::to_string(int64_t(s.slowest_ms)) +
                     " ms)");
}

}  // namespace sal::mesh
