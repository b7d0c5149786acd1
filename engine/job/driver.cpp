// driver.cpp — see driver.h. The handlers (the rows of driver_table.cpp) come first, then the
// phases they move through. The recovery half — restores, the recovery bookkeeping, snapshots and
// the checkpoint policy's measurements — is in driver_recovery.cpp.
#include "job/driver.h"

#include <algorithm>
#include <cstdio>

#include "core/devices.h"
#include "core/strings.h"
#include "plan/fixed_ep.h"
#include "plan/snapshot_peers.h"

namespace sal::job {

// How long every participant has to connect a new plan's data plane and move its state.
constexpr uint64_t kPlanTimeoutMs = 60000;
// A failed plan is tried again after this pause, doubled after each failure in a row up to 16x
// (deaths that caused it get noticed meanwhile, and a worker still stuck connecting an abandoned
// plan's data plane gets time to give up).
constexpr uint64_t kPlanRetryMs = 200;
constexpr int kPlanRetryDoublings = 4;
// After an aborted step whose cause is not seen yet (a peer's collective failed before the loss
// was noticed), the most the driver waits before planning again, for the same reason. It plans at
// once when a rank of the step is seen gone (usually within 1-2 ms of a kill: a pidfd, a closed
// socket); this pause was 50 ms of every recovery when it was a fixed wait.
constexpr uint64_t kAbortSettleMs = 50;
// Steps failing this many times in a row with the same workers end the job; plans, a few more
// (a plan's rendezvous can time out behind a worker still leaving an abandoned one).
constexpr int kMaxConsecutiveFailures = 3;
constexpr int kMaxConsecutivePlanFailures = 5;
// How long the final checkpoint may take.
constexpr uint64_t kSaveTimeoutMs = 120000;
// Dense snapshots kept on disk.
constexpr size_t kSnapshotsKept = 2;
// The checkpoint policy's measured inputs: medians over this many recent steps and snapshots.
constexpr size_t kMedianSteps = 20;
constexpr size_t kMedianSnapshots = 5;

namespace {

std::vector<NodeId> nodes_of(const std::vector<Participant>& ranks) {
  std::vector<NodeId> nodes;
  for (const auto& r : ranks)
    if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) nodes.push_back(r.node);
  return nodes;
}

std::string ms_text(int64_t ns) { return std::to_string(ns / 1'000'000) + " ms"; }

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::gathering: return "gathering";
    case Phase::planning: return "planning";
    case Phase::running: return "running";
    case Phase::saving: return "saving";
    case Phase::done: return "done";
    case Phase::failed: return "failed";
  }
  return "?";
}

const char* timer_name(Timer t) {
  switch (t) {
    case Timer::gate: return "gate";
    case Timer::plan: return "plan";
    case Timer::retry: return "retry";
    case Timer::join: return "join";
    case Timer::soon: return "soon";
    case Timer::count_: break;
  }
  return "?";
}

DriverConfig DriverConfig::from(const JobConfig& job, int64_t max_steps, const std::string& run_dir, int64_t origin_ns) {
  DriverConfig c;
  c.model = model_shape(job.model);
  auto devices = parse_devices(job.mesh.devices);
  c.expected_workers = uint32_t(job.mesh.nodes) * uint32_t(devices ? devices->size() : 1);
  c.join_window_ms = job.mesh.join_window_ms;
  c.join_batch_ms = job.mesh.join_batch_ms;
  c.rebalance_every = job.train.rebalance_every;
  c.checkpoint_every = job.train.checkpoint_every;
  c.peer_copies = uint32_t(job.train.peer_copies);
  c.peer_memory = uint64_t(job.train.peer_memory_mb) << 20;
  c.max_steps = max_steps;
  c.recovery = job.train.recovery;
  c.slots = uint32_t(job.policies.slots);
  c.min_replicas = uint32_t(job.policies.min_replicas);
  c.run_dir = run_dir;
  c.origin_ns = origin_ns;
  return c;
}

Driver::Driver(DriverConfig cfg)
    : cfg_(std::move(cfg)),
      loads_(size_t(cfg_.model.layers), size_t(cfg_.model.experts), size_t(std::max<int64_t>(cfg_.rebalance_every, 1))),
      step_s_(kMedianSteps),
      snapshot_Bps_(kMedianSnapshots) {
  if (!cfg_.run_dir.empty() && cfg_.checkpoint_every > 0)
    snapshots_.emplace(cfg_.run_dir + "/snapshots", uint32_t(model_unit_count(cfg_.model)), kSnapshotsKept);
}

Driver::Driver(DriverConfig cfg, const JournalState& journal) : Driver(std::move(cfg)) {
  steps_.resume(journal.committed, journal.commit_epoch);
  if (snapshots_) snapshots_->resume(journal.snapshots);
  applied_ = journal.plan;
  resuming_ = applied_.has_value();
}

std::optional<uint64_t> Driver::pending_plan() const {
  if (!pending_) return std::nullopt;
  return pending_->number;
}

std::vector<Action> Driver::handle(const Input& in) {
  out_.clear();
  now_ns_ = in.now_ns;
  std::optional<Timer> timer;
  if (auto* t = std::get_if<in::TimerFired>(&in.what)) timer = t->timer;
  if (Handler h = handler(phase_, in.what.index(), timer)) (this->*h)(in.what);
  return std::move(out_);
}

// ---------- handlers ----------

void Driver::on_membership(const Event& e) {
  if (auto* m = std::get_if<in::Membership>(&e)) view_ = m->view;
  poke();
}

void Driver::on_timer(const Event& e) {
  switch (std::get<in::TimerFired>(e).timer) {
    case Timer::plan:
      if (phase_ == Phase::saving) return finish_save(false, "not every worker saved in time");
      return plan_failed("not every worker connected and moved its state within " + std::to_string(kPlanTimeoutMs) + " ms");
    case Timer::retry: return retry_fired();
    // The timer is the deadline (the clock may read a hair less when it fires): the window is over.
    case Timer::gate: gate_over_ = true; return poke();
    case Timer::join: join_over_ = true; return poke();
    default: return poke();
  }
}

void Driver::on_lost(const Event& e) {
  const auto& l = std::get<in::Lost>(e);
  if (try_patch(l)) return;
  step_outcome(l.worker ? steps_.lost_worker({l.node, *l.worker}, l.cause) : steps_.lost(l.node, l.cause));
}

void Driver::on_vote(const Event& e) {
  const auto& v = std::get<in::Vote>(e).vote;
  Participant p{v.node_id, v.index};
  if (v.ok) sparse_copied(p, v);
  if (!vote_answers_patch(v)) return;  // a vote on the step as it was before a patch
  if (v.ok && v.step == tally_.step && steps_.in_flight() && steps_.participants().count(p) && tally_.voted.insert(p).second) {
    tally_.ce += v.ce_sum;
    tally_.tokens += v.tokens;
    tally_.aux = v.aux;
    tally_.grad_norm = v.grad_norm;
    tally_.lr = v.lr;
    tally_.compute_ms = std::max(tally_.compute_ms, v.compute_ms);
    if (v.loads.size() == tally_.loads.size())
      for (size_t i = 0; i < v.loads.size(); ++i) tally_.loads[i] += v.loads[i];
  }
  if (steps_.in_flight() && v.epoch != steps_.epoch())  // a node cut off in an older epoch
    note("stale_vote", "worker " + participant_name(p) + "'s vote for step " + std::to_string(v.step) + " of epoch " +
                           std::to_string(v.epoch) + " refused: the step in flight began in epoch " +
                           std::to_string(steps_.epoch()), act::Level::warn);
  step_outcome(steps_.vote(p, v.epoch, v.step, v.ok, v.detail));
}

void Driver::on_ready(const Event& e) {
  const auto& r = std::get<in::Ready>(e).ready;
  if (!pending_ || r.plan != pending_->number) return;  // an abandoned plan's late answer
  Participant p{r.node_id, r.index};
  if (!pending_->waiting.count(p)) return;
  for (const auto& n : r.notes) note("slice_fallback", "worker " + participant_name(p) + ": " + n, act::Level::warn);
  if (!r.ok) return plan_failed("worker " + participant_name(p) + ": " + r.detail);
  pending_->waiting.erase(p);
  pending_->slowest_connect_ms = std::max(pending_->slowest_connect_ms, r.connect_ms);
  pending_->slowest_migrate_ms = std::max(pending_->slowest_migrate_ms, r.migrate_ms);
  if (pending_->waiting.empty()) plan_applied();
}

void Driver::on_saved(const Event& e) {
  const auto& d = std::get<in::Saved>(e).done;
  if (d.snapshot) return snapshot_answered(d);
  Participant p{d.node_id, d.index};
  if (phase_ != Phase::saving || !save_waiting_.erase(p)) return;
  if (!d.ok) return finish_save(false, "worker " + participant_name(p) + ": " + d.detail);
  saved_units_ += d.units;
  if (save_waiting_.empty()) finish_save(true, "");
}

void Driver::on_decided(const Event& e) {
  const auto& d = std::get<in::Decided>(e);
  if (!deciding_ || d.decision != deciding_->decision) return;  // superseded
  Deciding was = std::move(*deciding_);
  deciding_.reset();
  if (!d.record) {
    note("plan_failed", was.why + ": " + d.record.error().message(), act::Level::info, true);
    cannot_plan(std::to_string(was.choice.use.size()) + " workers: " + d.record.error().message());
    set_phase(Phase::gathering);
    gather_since_ns_ = 0;
    return;
  }
  // Workers lost while the policies decided: the decision is for workers that are gone.
  for (const auto& w : was.choice.use)
    if (!contains(view_.ready, w)) return start_plan("again: worker " + participant_name(w) + " left while the plan was decided");
  plan_decided(was, *d.record);
}

void Driver::on_request(const Event& e) {
  const auto& r = std::get<in::PlanRequest>(e);
  plan_wanted_ = true;
  plan_with_loads_ = plan_with_loads_ || r.use_loads;
  plan_reason_ = r.why;
  arm(Timer::soon, 0);  // looked at after the request's caller returns
}

void Driver::on_stop(const Event& e) {
  const auto& stop = std::get<in::Stop>(e);
  const auto& why = stop.why;
  // A user's stop of a running job: abort the step in flight, then save what is committed.
  const bool save = stop.save && !stopping_ && phase_ == Phase::running && applied_ && !cfg_.run_dir.empty() &&
                    steps_.committed() > 0;
  if (stop.save && !save && phase_ != Phase::saving) out_.push_back(act::StopJob{why});
  stopping_ = true;
  for (Timer t : {Timer::gate, Timer::plan, Timer::retry}) cancel(t);
  deciding_.reset();
  if (pending_) {
    abort_ranks(pending_->ranks, pending_->step, std::string(kStopReason) + why);
    pending_.reset();
  }
  step_outcome(steps_.abort(std::string(kStopReason) + why));
  if (save) {
    stop_save_ = true;
    return start_save("stopped after " + std::to_string(steps_.committed()) + " steps: " + why);
  }
  if (phase_ != Phase::failed && phase_ != Phase::saving) set_phase(Phase::done);
}

// ---------- gathering ----------

// The phase's look at the state after something changed.
void Driver::poke() {
  if (phase_ == Phase::saving) return check_savers();  // a stop's final save too: a saver may leave
  if (stopping_) return;
  switch (phase_) {
    case Phase::gathering: return gather();
    case Phase::planning:
      end_settle_if_cause_seen();
      return check_pending();
    case Phase::running:
      if (!steps_.in_flight()) boundary();
      return;
    default: return;
  }
}

void Driver::gather() {
  if (resuming_) return reconcile();
  const auto& ready = view_.ready;
  if (ready.empty()) {
    gather_since_ns_ = 0;
    if (!view_.start_failure.empty() && !applied_) fail_job("no worker could start: " + view_.start_failure);
    return;
  }
  if (gather_since_ns_ == 0) {
    gather_since_ns_ = now_ns_;
    gate_over_ = false;
    arm(Timer::gate, uint64_t(cfg_.join_window_ms));
  }
  bool window_over = gate_over_ || now_ns_ - gather_since_ns_ >= cfg_.join_window_ms * 1'000'000;
  if (ready.size() < cfg_.expected_workers && !window_over) return;
  cancel(Timer::gate);
  start_plan(ready.size() >= cfg_.expected_workers
                 ? "start: " + std::to_string(ready.size()) + " workers ready"
                 : "start: join window over with " + std::to_string(ready.size()) + " of " +
                       std::to_string(cfg_.expected_workers) + " workers");
}

// ---------- plans ----------

WorkerChoice Driver::choose(const std::vector<Participant>& ready, uint64_t step) const {
  uint32_t ep = plan::ep_size(uint32_t(cfg_.model.experts), cfg_.slots);
  Restorable have;
  if (snapshots_ && snapshots_->latest()) have.dense_step = snapshots_->latest()->step;
  have.sparse_to = [this, step] {
    auto w = peer_window(step);
    return w ? std::optional<uint64_t>(w->to) : std::nullopt;
  };
  auto c = choose_workers(cfg_.recovery, ep, ready, applied_, step, have);
  if (replaying() && !c.restore() && !c.use.empty()) {
    // frozen operators have no optimizer state to move, and new holders no later slots to load
    c.rung = restore_rung({"the replay"}, have);
    c.why = "the replay of the sparse window (to iteration " + std::to_string(*replay_to_) + ") was interrupted";
  }
  return c;
}

std::optional<PeerWindow> Driver::peer_window(uint64_t committed) const {
  if (cfg_.peer_copies == 0) return std::nullopt;
  std::set<NodeId> live;
  for (const auto& [node, sn] : view_.slices) live.insert(node);
  return restorable_window(peer_slices_, live, cfg_.model, committed, peer_windows_failed_);
}

void Driver::add_slice_peers(wire::PlanUpdate& u) const {
  u.slice_budget = cfg_.peer_memory;
  if (cfg_.peer_copies == 0) return;
  for (const auto& [node, sn] : view_.slices) u.slice_nodes.push_back(sn);
  std::vector<uint32_t> node_of_rank;
  for (const auto& r : u.ranks) node_of_rank.push_back(r.node);
  for (auto& nodes : plan::snapshot_peers(u.plan, node_of_rank, cfg_.peer_copies)) {
    std::erase_if(nodes, [&](uint32_t n) { return !view_.slices.count(NodeId(n)); });
    u.slice_peers.push_back({std::move(nodes)});
  }
}

void Driver::start_plan(const std::string& why) {
  cancel(Timer::retry);
  cancel(Timer::plan);
  deciding_.reset();
  if (pending_) {  // a plan in flight that a newer one replaces: its ranks stop waiting for it
    abort_ranks(pending_->ranks, pending_->step, "plan " + std::to_string(pending_->number) + " replaced: " + why);
    out_.push_back(act::EraseKeys{pending_->number});
    pending_.reset();
  }
  if (view_.ready.empty()) {
    set_phase(Phase::gathering);
    gather_since_ns_ = 0;
    return;
  }
  set_phase(Phase::planning, why);
  drop_snapshots_of_lost();
  std::optional<std::vector<std::vector<double>>> loads;
  if (plan_with_loads_ && !loads_.empty()) loads = loads_.mean();
  plan_wanted_ = plan_with_loads_ = false;
  uint64_t step = steps_.committed();
  auto choice = choose(view_.ready, step);
  if (choice.use.empty()) {
    note("plan_failed", why + ": " + choice.why, act::Level::info, true);
    cannot_plan(choice.why);
    set_phase(Phase::gathering);
    gather_since_ns_ = 0;
    return;
  }
  deciding_ = Deciding{++decisions_, why, choice, step, view_.epoch, plane_spent_};
  act::DecidePlan ask;
  ask.decision = deciding_->decision;
  ask.workers = uint32_t(choice.use.size());
  ask.epoch = view_.epoch;
  ask.loads = std::move(loads);
  ask.facts = facts_;
  ask.facts.iteration = step;
  if (keep_applied_) ask.keep = applied_->plan;
  keep_applied_ = false;
  if (cfg_.recovery != "elastic")
    ask.fixed_groups = uint32_t(choice.use.size()) / plan::ep_size(uint32_t(cfg_.model.experts), cfg_.slots);
  out_.push_back(std::move(ask));
}

// ", stacks by spare gen 1: 3 of 4 groups up, depth 2" for a plan of data-parallel groups.
std::string Driver::stacks_text(const PlanRecord& rec) {
  const uint32_t G = plan::group_count(rec.plan);
  if (G <= 1) return "";
  uint32_t up = 0;
  for (uint32_t n : rec.plan.groups) up += n > 0;
  return ", stacks by " + rec.redundancy_by + ": " + std::to_string(up) + " of " + std::to_string(G) + " groups up, depth " +
         std::to_string(rec.plan.stacks.depth());
}

void Driver::plan_decided(const Deciding& d, const PlanRecord& rec) {
  uint64_t number = rec.plan.version;
  const auto& use = d.choice.use;
  note("plan", "plan " + std::to_string(number) + " for " + std::to_string(use.size()) + " workers (" + d.why +
                   "): allocation by " + rec.allocation_by + ", placement by " + rec.placement_by + stacks_text(rec) +
                   (rec.note.empty() ? "" : "; " + rec.note),
       act::Level::info, true);
  if (rec.plan.floor < cfg_.min_replicas && cfg_.recovery == "elastic") {
    std::string detail = "plan " + std::to_string(number) + " guarantees " + std::to_string(rec.plan.floor) +
                         " replicas per expert, below policies.min_replicas = " + std::to_string(cfg_.min_replicas) +
                         " (" + std::to_string(use.size()) + " workers x " + std::to_string(cfg_.slots) + " slots)" +
                         (rec.note.empty() ? "" : ": " + rec.note);
    note("floor_lowered", detail, act::Level::warn);
  }
  if (cfg_.resume_from && !applied_) return start_resume(rec, d);
  if (d.choice.restore()) return start_restore(rec, d.choice);
  auto sw = switch_plan(applied_, use, rec.plan, d.step);
  if (!sw) return fail_job("plan " + std::to_string(number) + ": " + sw.error().message());
  // Kept only when nothing would change: the same ranks, placement, checkpoint schedule and stacks
  // (a new schedule alone, say from another checkpoint policy, is put in force).
  if (!d.must_switch && applied_ && applied_->ranks == sw->ranks && plan::same_placement(applied_->plan, rec.plan) &&
      applied_->plan.schedule == rec.plan.schedule && applied_->plan.stacks == rec.plan.stacks) {
    note("plan_kept", "plan " + std::to_string(number) + " places every expert as plan " +
                          std::to_string(applied_->number()) + " does, with its checkpoint schedule and stacks; plan " +
                          std::to_string(applied_->number()) + " stays",
         act::Level::info, true);
    applied_->from_step = d.step;
    set_phase(Phase::running);
    return boundary();
  }
  Pending p{number, d.step, sw->ranks, rec.plan, *sw, {}, d.why, now_ns_};
  begin_switch(std::move(p), plan_update(d.epoch, d.step, *sw, rec.plan));
}

void Driver::begin_switch(Pending p, wire::PlanUpdate u) {
  add_slice_peers(u);
  pending_ = std::move(p);
  pending_->waiting.insert(pending_->ranks.begin(), pending_->ranks.end());
  send(pending_->ranks, std::move(u));
  arm(Timer::plan, kPlanTimeoutMs);
}

// Said once for as long as the reason stays the same: planning is tried again whenever the
// workers change, and only more workers can unblock it.
void Driver::cannot_plan(const std::string& why) {
  if (why == cannot_plan_) return;
  cannot_plan_ = why;
  note("", "no plan can be made (" + why + "); waiting for more workers to join", act::Level::warn);
}

void Driver::plan_applied() {
  Pending p = std::move(*pending_);
  pending_.reset();
  cancel(Timer::plan);
  uint64_t previous = applied_ ? applied_->number() : 0;
  applied_ = AppliedPlan{p.ranks, p.plan, p.step};
  plane_spent_ = false;
  sparse_replaced_ = 0;
  replay_to_.reset();
  if (p.restore == Rung::sparse && p.restore_window && p.restore_to) replay_to_ = *p.restore_to;
  cannot_plan_.clear();
  out_.push_back(act::Journal{rec::Plan{*applied_}, true});
  std::string detail = "plan " + std::to_string(p.number) + " in force from step " + std::to_string(p.step) + " on " +
                       std::to_string(p.ranks.size()) + " workers: " + std::to_string(p.sw.experts_moved) +
                       " expert replicas moved, " + std::to_string(p.sw.experts_kept) + " kept, " +
                       std::to_string(p.sw.dense_moved) + " dense units sent to new workers; " +
                       ms_text(now_ns_ - p.started_ns) + " (slowest worker: connect " +
                       std::to_string(int64_t(p.slowest_connect_ms)) + " ms, migrate " +
                       std::to_string(int64_t(p.slowest_migrate_ms)) + " ms)";
  note("plan_applied", detail);
  if (p.restore) {
    std::string restored = "restored " + p.restore_from + " on " + std::to_string(p.ranks.size()) + " workers in " +
                           ms_text(now_ns_ - p.started_ns) + "; training goes on from step " + std::to_string(p.step);
    note("restored", restored);
    out_.push_back(act::Restored{});
  }
  out_.push_back(act::PlanInForce{*applied_, loads_.empty() ? std::vector<std::vector<double>>{} : loads_.mean()});
  if (previous) out_.push_back(act::EraseKeys{previous});
  out_.push_back(act::EraseKeys{p.number});  // every rank has connected: the rendezvous keys are done with
  plan_failures_ = 0;
  set_phase(Phase::running);
  boundary();
}

void Driver::plan_failed(const std::string& why, bool membership) {
  if (!pending_) return;
  if (!membership && pending_->restore == Rung::sparse) sparse_restore_failed(why);
  Pending p = std::move(*pending_);
  pending_.reset();
  cancel(Timer::plan);
  std::string detail = "plan " + std::to_string(p.number) + " not applied: " + why;
  note("plan_failed", detail, act::Level::warn);
  abort_ranks(p.ranks, p.step, detail);
  out_.push_back(act::EraseKeys{p.number});
  plane_spent_ = true;  // the ranks may have let go of the plan in force's data plane already
  if (membership) recovery_begins(detail);
  if (!membership && ++plan_failures_ >= kMaxConsecutivePlanFailures)
    return fail_job(std::to_string(plan_failures_) + " plans in a row could not be applied; the last: " + why);
  retry_ = Retry{false, why, {}, 0};
  arm(Timer::retry, kPlanRetryMs << std::min(plan_failures_, kPlanRetryDoublings));
}

// A pending plan whose ranks are not all still ready can never complete.
void Driver::check_pending() {
  if (!pending_) return;
  for (const auto& r : pending_->ranks)
    if (!contains(view_.ready, r)) return plan_failed("worker " + participant_name(r) + " left", true);
}

void Driver::retry_fired() {
  if (!retry_) return;
  Retry r = std::move(*retry_);
  retry_.reset();
  if (!r.after_abort) return start_plan("again after: " + r.why);
  // A step that failed because a worker left (noticed by now) is not the step's fault: only
  // failures with the same workers count towards ending the job.
  step_failures_ = view_.ready == r.ranks ? step_failures_ + 1 : 0;
  if (step_failures_ >= kMaxConsecutiveFailures)
    return fail_job("step " + std::to_string(r.step) + " failed " + std::to_string(step_failures_) +
                    " times in a row with the same workers; the last: " + r.why);
  start_plan("step aborted: " + r.why);
}

// ---------- steps ----------

// Only between steps under a plan in force.
void Driver::boundary() {
  if (stopping_ || !applied_ || phase_ != Phase::running || pending_) return;
  uint64_t done = steps_.committed();
  if (cfg_.max_steps > 0 && int64_t(done) >= cfg_.max_steps)
    return start_save("completed " + std::to_string(steps_.committed()) + " steps");
  const auto& ready = view_.ready;
  auto ranks = applied_->ranks;
  std::sort(ranks.begin(), ranks.end());
  auto use = choose(ready, done).use;  // the baselines idle some
  std::sort(use.begin(), use.end());
  if (use != ranks) {
    size_t joined = 0, left = 0;
    for (const auto& r : ready) joined += !contains(applied_->ranks, r);
    for (const auto& r : applied_->ranks) left += !contains(ready, r);
    std::string why = "workers changed: " + std::to_string(joined) + " joined, " + std::to_string(left) + " left";
    if (left > 0 || (!replaying() && join_batch_over())) {  // joins wait for a replay to end
      join_seen_ns_ = 0;
      if (left > 0) recovery_begins(why);
      return start_plan(why);
    }
  } else {
    join_seen_ns_ = 0;
  }
  if (plan_wanted_ && !replaying()) return start_plan(plan_reason_);
  int64_t every = cfg_.rebalance_every;
  if (every > 0 && !replaying() && done > applied_->from_step && int64_t(done - applied_->from_step) >= every) {
    plan_with_loads_ = true;
    return start_plan("rebalance: " + std::to_string(every) + " steps under plan " + std::to_string(applied_->number()));
  }
  if (cfg_.max_steps > 0) begin_step();
}

// Joins wait mesh.join_batch_ms from the first of them; meanwhile training goes on under the plan
// in force (the timer covers a job with no step running).
bool Driver::join_batch_over() {
  if (join_seen_ns_ == 0) {
    join_seen_ns_ = now_ns_;
    join_over_ = false;
    if (cfg_.join_batch_ms > 0) arm(Timer::join, uint64_t(cfg_.join_batch_ms));
  }
  return join_over_ || now_ns_ - join_seen_ns_ >= cfg_.join_batch_ms * 1'000'000;
}

void Driver::begin_step() {
  patch_.reset();
  tally_ = Tally{};
  tally_.step = steps_.next_step();
  tally_.loads.assign(size_t(cfg_.model.layers) * size_t(cfg_.model.experts), 0);
  tally_.begun_ns = now_ns_;
  steps_.begin(view_.epoch, applied_->ranks);
  send(applied_->ranks, wire::StepBegin{view_.epoch, tally_.step, applied_->number()});
}

void Driver::step_outcome(StepCoordinator::Outcome o) {
  using O = StepCoordinator::Outcome;
  if (o == O::committed) {
    // The metrics row first (a resumed controller drops rows past the journal's commits), then the
    // commit, durable before any worker is told: no worker can be ahead of the journal.
    StepRecord r = step_record();
    out_.push_back(act::StepDone{r});
    out_.push_back(act::Journal{rec::Commit{steps_.committed(), steps_.epoch()}, true});
    out_.push_back(act::Send{{}, true, wire::StepCommit{steps_.epoch(), tally_.step}});
    committed(r);
  } else if (o == O::aborted) {
    step_aborted();
  }
}

void Driver::step_aborted() {
  // a patched step that could not commit after all: every worker it lost must be seen gone before
  // the plan is made (the last loss may still be in the view), and the recovery is no patch
  std::set<Participant> lost = patch_ ? patch_->lost : std::set<Participant>{};
  patch_.reset();
  if (recovery_) recovery_->patched = false;
  const std::string& why = steps_.last_abort_reason();
  note("step_aborted", "step " + std::to_string(tally_.step) + ": " + why, act::Level::warn);
  out_.push_back(act::Send{{}, true, wire::StepAbort{steps_.epoch(), tally_.step, why}});
  if (stopping_) return;
  recovery_begins("step " + std::to_string(tally_.step) + " aborted: " + why);
  plane_spent_ = true;
  set_phase(Phase::planning);  // its data plane is spent: the next step needs a plan
  auto ranks = applied_ ? applied_->ranks : std::vector<Participant>{};
  std::sort(ranks.begin(), ranks.end());
  retry_ = Retry{true, why, ranks, tally_.step, std::move(lost)};
  arm(Timer::retry, kAbortSettleMs);
  end_settle_if_cause_seen();
}

// The pause after an aborted step ends once a rank of that step is seen gone: the cause is known,
// and a plan made now cannot include it.
void Driver::end_settle_if_cause_seen() {
  if (!retry_ || !retry_->after_abort) return;
  for (const auto& r : retry_->lost)
    if (contains(view_.ready, r)) return;
  for (const auto& r : retry_->ranks)
    if (!contains(view_.ready, r)) {
      cancel(Timer::retry);
      return retry_fired();
    }
}

StepRecord Driver::step_record() const {
  StepRecord r;
  r.step = tally_.step;
  r.tokens = tally_.tokens;
  r.ce = tally_.tokens ? tally_.ce / double(tally_.tokens) : 0;
  r.aux = tally_.aux;
  r.loss = r.ce + r.aux;
  r.grad_norm = tally_.grad_norm;
  r.lr = tally_.lr;
  r.step_ms = double(now_ns_ - tally_.begun_ns) / 1e6;
  r.compute_ms = tally_.compute_ms;
  r.tokens_per_s = r.step_ms > 0 ? double(r.tokens) / (r.step_ms / 1e3) : 0;
  r.workers = uint32_t(applied_->ranks.size());
  r.plan = applied_->number();
  r.time_s = now_s();
  std::vector<std::vector<std::vector<uint32_t>>> placement;
  for (const auto& layer : applied_->plan.layers) placement.push_back(layer.placement);
  r.imbalance = expert_imbalance(tally_.loads, placement, size_t(cfg_.model.experts));
  return r;
}

void Driver::committed(const StepRecord& r) {
  step_failures_ = 0;
  recovery_ends(tally_.step);
  if (patch_) {  // the plan's cross-group plane is spent and a group lost ranks: it re-plans now
    note("step_patched", "step " + std::to_string(tally_.step) + " committed without " + std::to_string(patch_->lost.size()) +
                             " lost worker(s), patched " + std::to_string(patch_->sent) + " time(s); group(s) re-plan next");
    patch_.reset();
    plane_spent_ = true;
    plan_wanted_ = true;
    plan_reason_ = "re-plan after patched step " + std::to_string(tally_.step);
  }
  loads_.add(tally_.loads);
  step_s_.add(r.step_ms / 1e3);
  facts_.iteration_s = step_s_.median();
  facts_.popularity = loads_.mean();
  for (auto& layer : facts_.popularity) {
    double sum = 0;
    for (double x : layer) sum += x;
    for (double& x : layer) x = sum > 0 ? x / sum : 0;
  }
  maybe_snapshot();
  if (cfg_.max_steps > 0 && int64_t(steps_.committed()) >= cfg_.max_steps)
    note("steps_done", std::to_string(steps_.committed()) + " steps committed", act::Level::info, true);
  // The next step begins at the next turn: what the commit's hooks change (a drill's drain, say)
  // and what arrived meanwhile come first.
  out_.push_back(act::Committed{r.step});
  arm(Timer::soon, 0);
}

// ---------- the end ----------

void Driver::start_save(const std::string& done) {
  if (cfg_.run_dir.empty() || !applied_) {
    set_phase(Phase::done);
    out_.push_back(act::Journal{rec::End{done}, true});
    out_.push_back(act::StopJob{done});
    return;
  }
  set_phase(Phase::saving);
  save_done_ = done;
  checkpoint_dir_ = cfg_.run_dir + "/checkpoint";
  saved_units_ = 0;
  save_waiting_ = std::set<Participant>(applied_->ranks.begin(), applied_->ranks.end());
  send(applied_->ranks, wire::SaveCheckpoint{checkpoint_dir_, steps_.committed(), applied_->number()});
  arm(Timer::plan, kSaveTimeoutMs);
}

void Driver::check_savers() {
  for (const auto& p : save_waiting_)
    if (!contains(view_.ready, p)) return finish_save(false, "worker " + participant_name(p) + " left before it had saved");
}

void Driver::finish_save(bool ok, const std::string& detail) {
  if (phase_ != Phase::saving) return;
  cancel(Timer::plan);
  const std::string& done = save_done_;
  if (!ok && stop_save_) {  // the job was stopping anyway: it stops, saying what was not saved
    note("checkpoint_failed", "the final checkpoint was not written: " + detail, act::Level::warn);
    checkpoint_dir_.clear();  // there is none to point at
    set_phase(Phase::done);
    out_.push_back(act::Journal{rec::End{done}, true});
    out_.push_back(act::StopJob{done + " (the final checkpoint was not written: " + detail + ")"});
    return;
  }
  if (!ok) return fail_job(done + ", but the checkpoint was not written: " + detail);
  out_.push_back(act::CheckpointComplete{checkpoint_dir_, steps_.committed(), saved_units_});
  note("checkpoint_saved", std::to_string(saved_units_) + " units of step " + std::to_string(steps_.committed()) +
                               " in " + checkpoint_dir_);
  set_phase(Phase::done);
  out_.push_back(act::Journal{rec::End{done}, true});
  out_.push_back(act::StopJob{done});
}

void Driver::fail_job(const std::string& why) {
  if (phase_ == Phase::failed) return;
  set_phase(Phase::failed);
  failure_ = why;
  pending_.reset();
  deciding_.reset();
  cancel(Timer::plan);
  cancel(Timer::retry);
  note("job_failed", why, act::Level::error, true);
  note("", "training cannot go on: " + why, act::Level::error);
  out_.push_back(act::Journal{rec::End{"failed: " + why}, true});
  out_.push_back(act::StopJob{"failed: " + why});
}

// ---------- helpers ----------

void Driver::set_phase(Phase p, const std::string& detail) {
  phase_ = p;
  switch (p) {
    case Phase::gathering: return out_.push_back(act::Phase{"wait", detail});
    case Phase::planning: return out_.push_back(act::Phase{"reconfigure", detail});
    case Phase::running: return out_.push_back(act::Phase{"compute", detail});
    case Phase::saving: return out_.push_back(act::Phase{"save", detail});
    case Phase::done:
    case Phase::failed: return out_.push_back(act::Phase{"", detail});
  }
}

void Driver::note(std::string kind, std::string detail, act::Level level, bool quiet) {
  out_.push_back(act::Note{std::move(kind), std::move(detail), level, quiet});
}

void Driver::send(const std::vector<Participant>& ranks, act::Message msg) {
  out_.push_back(act::Send{nodes_of(ranks), false, std::move(msg)});
}

void Driver::abort_ranks(const std::vector<Participant>& ranks, uint64_t step, const std::string& why) {
  send(ranks, wire::StepAbort{steps_.epoch(), step, why});
}

}  // namespace sal::job
