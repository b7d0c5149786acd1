// driver.cpp — see driver.h. The handlers (the rows of driver_table.cpp) come first, then the
// phases they move through: gathering, planning (deciding, switching, retrying), running, and the
// end. The recovery half — restores, reconciliation, the recovery bookkeeping, snapshots — is in
// driver_recovery.cpp; SPARe's patch in driver_patch.cpp.
#include "job/driver.h"

#include <algorithm>

#include "core/devices.h"
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

namespace {

std::vector<NodeId> nodes_of(const std::vector<Participant>& ranks) {
  std::vector<NodeId> nodes;
  for (const auto& r : ranks)
    if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) nodes.push_back(r.node);
  return nodes;
}

std::string ms_text(int64_t ns) { return std::to_string(ns / 1'000'000) + " ms"; }

std::vector<Participant> sorted(std::vector<Participant> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

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
      measured_(cfg_.model, size_t(std::max<int64_t>(cfg_.rebalance_every, 1))),
      peers_(cfg_.model, cfg_.peer_copies) {
  if (!cfg_.run_dir.empty() && cfg_.checkpoint_every > 0)
    snapshots_.emplace(cfg_.run_dir + "/snapshots", uint32_t(model_unit_count(cfg_.model)), kSnapshotsKept);
}

Driver::Driver(DriverConfig cfg, const JournalState& journal) : Driver(std::move(cfg)) {
  steps_.resume(journal.committed, journal.commit_epoch);
  if (snapshots_) snapshots_->resume(journal.snapshots);
  applied_ = journal.plan;
  if (applied_) state_ = phase::Reconciling{};
}

std::optional<uint64_t> Driver::pending_plan() const {
  if (const auto* p = std::get_if<phase::Switching>(&state_)) return p->number;
  return std::nullopt;
}

const std::string& Driver::failure() const {
  static const std::string kNone;
  const auto* f = std::get_if<phase::Failed>(&state_);
  return f ? f->why : kNone;
}

const std::string& Driver::checkpoint_dir() const {
  static const std::string kNone;
  if (const auto* d = std::get_if<phase::Done>(&state_)) return d->checkpoint_dir;
  if (const auto* s = std::get_if<phase::Saving>(&state_)) return s->dir;
  return kNone;
}

// ---------- handlers: any phase ----------

Driver::Next Driver::on_request(const Event& e) {
  const auto& r = std::get<in::PlanRequest>(e);
  wanted_ = Wanted{r.why, r.use_loads || (wanted_ && wanted_->with_loads)};
  arm(Timer::soon, 0);  // looked at after the request's caller returns
  return std::nullopt;
}

// A user's stop of a running job aborts the step in flight, then saves what is committed;
// otherwise (or with nothing to save) the job is done at once. A job already saving or over
// stays as it is.
Driver::Next Driver::on_stop(const Event& e) {
  const auto& stop = std::get<in::Stop>(e);
  auto* running = std::get_if<phase::Running>(&state_);
  const bool save = stop.save && running && applied_ && !cfg_.run_dir.empty() && steps_.committed() > 0;
  const bool saving = std::holds_alternative<phase::Saving>(state_);
  if (stop.save && !save && !saving) out_.push_back(act::StopJob{stop.why});
  for (Timer t : {Timer::gate, Timer::plan, Timer::retry}) cancel(t);
  if (auto* p = std::get_if<phase::Switching>(&state_))
    abort_ranks(p->ranks, p->step, std::string(kStopReason) + stop.why);
  if (steps_.abort(std::string(kStopReason) + stop.why) == StepCoordinator::Outcome::aborted && running)
    announce_abort(running->tally);
  if (save) return start_save("stopped after " + std::to_string(steps_.committed()) + " steps: " + stop.why, true);
  if (saving || coarse(state_) == Phase::done || coarse(state_) == Phase::failed) return std::nullopt;
  return phase::Done{};
}

// ---------- gathering ----------

Driver::Next Driver::on_gather(const Event& e) {
  auto& g = std::get<phase::Gathering>(state_);
  if (auto* t = std::get_if<in::TimerFired>(&e); t && t->timer == Timer::gate) g.join.over = true;
  return gather(g);
}

Driver::Next Driver::gather(phase::Gathering& g) {
  const auto& ready = view_.ready;
  if (ready.empty()) {
    g.join = {};
    if (!view_.start_failure.empty() && !applied_) return fail_job("no worker could start: " + view_.start_failure);
    return std::nullopt;
  }
  if (ready.size() < cfg_.expected_workers && !window_over(g.join, cfg_.join_window_ms)) return std::nullopt;
  cancel(Timer::gate);
  return start_plan(ready.size() >= cfg_.expected_workers
                        ? "start: " + std::to_string(ready.size()) + " workers ready"
                        : "start: join window over with " + std::to_string(ready.size()) + " of " +
                              std::to_string(cfg_.expected_workers) + " workers");
}

// A window of `ms` from the first time it is asked about (arming Timer::gate then). The timer is
// the deadline (the clock may read a hair less when it fires): the window is over.
bool Driver::window_over(phase::Window& w, int64_t ms) {
  if (w.since_ns == 0) {
    w = {now_ns_, false};
    arm(Timer::gate, uint64_t(ms));
  }
  return w.over || now_ns_ - w.since_ns >= ms * 1'000'000;
}

// ---------- planning: deciding ----------

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
    c.why = "the replay of the sparse window (to iteration " + std::to_string(*peers_.replay_to()) + ") was interrupted";
  }
  return c;
}

std::optional<PeerWindow> Driver::peer_window(uint64_t committed) const {
  std::set<NodeId> live;
  for (const auto& [node, sn] : view_.slices) live.insert(node);
  return peers_.restorable(live, committed);
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

// Asks the planner for a plan over the workers the recovery mode uses now. `with_loads`: balanced
// on the measured loads (a rebalance; a request may ask too); `keep`: the plan in force again (a
// resumed job whose ranks all came back).
Driver::Next Driver::start_plan(std::string why, bool with_loads, bool keep) {
  cancel(Timer::retry);
  cancel(Timer::plan);
  if (view_.ready.empty()) return phase::Gathering{};
  drop_snapshots_of_lost();
  with_loads = with_loads || (wanted_ && wanted_->with_loads);
  wanted_.reset();
  const uint64_t step = steps_.committed();
  auto choice = choose(view_.ready, step);
  if (choice.use.empty()) return cannot_plan(choice.why, why + ": " + choice.why);
  phase::Deciding d{++decisions_, why, choice, step, view_.epoch, plane_spent_};
  act::DecidePlan ask;
  ask.decision = d.decision;
  ask.workers = uint32_t(choice.use.size());
  ask.epoch = view_.epoch;
  if (with_loads && !measured_.loads().empty()) ask.loads = measured_.loads().mean();
  ask.facts = measured_.facts();
  ask.facts.iteration = step;
  if (keep) ask.keep = applied_->plan;
  if (cfg_.recovery != "elastic")
    ask.fixed_groups = uint32_t(choice.use.size()) / plan::ep_size(uint32_t(cfg_.model.experts), cfg_.slots);
  out_.push_back(std::move(ask));
  return d;
}

// No plan can be made with the workers there are: back to gathering, said once for as long as the
// reason stays the same (planning is tried again whenever the workers change, and only more
// workers can unblock it).
Driver::Next Driver::cannot_plan(const std::string& why, const std::string& detail) {
  note("plan_failed", detail, act::Level::info, true);
  if (why != streak_.cannot_plan) {
    streak_.cannot_plan = why;
    note("", "no plan can be made (" + why + "); waiting for more workers to join", act::Level::warn);
  }
  return phase::Gathering{};
}

Driver::Next Driver::on_view(const Event&) { return std::nullopt; }

Driver::Next Driver::on_decided(const Event& e) {
  const auto& d = std::get<in::Decided>(e);
  const auto& deciding = std::get<phase::Deciding>(state_);
  if (d.decision != deciding.decision) return std::nullopt;  // superseded
  if (!d.record)
    return cannot_plan(std::to_string(deciding.choice.use.size()) + " workers: " + d.record.error().message(),
                       deciding.why + ": " + d.record.error().message());
  // Workers lost while the policies decided: the decision is for workers that are gone.
  for (const auto& w : deciding.choice.use)
    if (!contains(view_.ready, w)) return start_plan("again: worker " + participant_name(w) + " left while the plan was decided");
  return plan_decided(deciding, *d.record);
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

Driver::Next Driver::plan_decided(const phase::Deciding& d, const PlanRecord& rec) {
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
    return in_force();
  }
  phase::Switching p{number, d.step, sw->ranks, rec.plan, *sw, {}, d.why, now_ns_};
  return begin_switch(std::move(p), plan_update(d.epoch, d.step, *sw, rec.plan));
}

// ---------- planning: switching ----------

Driver::Next Driver::begin_switch(phase::Switching p, wire::PlanUpdate u) {
  add_slice_peers(u);
  p.waiting.insert(p.ranks.begin(), p.ranks.end());
  send(p.ranks, std::move(u));
  arm(Timer::plan, kPlanTimeoutMs);
  return p;
}

// A pending plan whose ranks are not all still ready can never complete.
Driver::Next Driver::on_switch_view(const Event&) {
  auto& p = std::get<phase::Switching>(state_);
  for (const auto& r : p.ranks)
    if (!contains(view_.ready, r)) return plan_failed(p, "worker " + participant_name(r) + " left", true);
  return std::nullopt;
}

Driver::Next Driver::on_ready(const Event& e) {
  const auto& r = std::get<in::Ready>(e).ready;
  auto& p = std::get<phase::Switching>(state_);
  if (r.plan != p.number) return std::nullopt;  // an abandoned plan's late answer
  Participant who{r.node_id, r.index};
  if (!p.waiting.count(who)) return std::nullopt;
  for (const auto& n : r.notes) note("slice_fallback", "worker " + participant_name(who) + ": " + n, act::Level::warn);
  if (!r.ok) return plan_failed(p, "worker " + participant_name(who) + ": " + r.detail);
  p.waiting.erase(who);
  p.slowest_connect_ms = std::max(p.slowest_connect_ms, r.connect_ms);
  p.slowest_migrate_ms = std::max(p.slowest_migrate_ms, r.migrate_ms);
  if (!p.waiting.empty()) return std::nullopt;
  return plan_applied(p);
}

Driver::Next Driver::on_switch_timeout(const Event&) {
  return plan_failed(std::get<phase::Switching>(state_),
                     "not every worker connected and moved its state within " + std::to_string(kPlanTimeoutMs) + " ms");
}

Driver::Next Driver::plan_applied(phase::Switching& p) {
  cancel(Timer::plan);
  uint64_t previous = applied_ ? applied_->number() : 0;
  applied_ = AppliedPlan{p.ranks, p.plan, p.step};
  plane_spent_ = false;
  peers_.plan_applied(p.restore == Rung::sparse && p.restore_window ? p.restore_to : std::nullopt);
  streak_.cannot_plan.clear();
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
  out_.push_back(act::PlanInForce{*applied_, measured_.loads().empty() ? std::vector<std::vector<double>>{}
                                                                        : measured_.loads().mean()});
  if (previous) out_.push_back(act::EraseKeys{previous});
  out_.push_back(act::EraseKeys{p.number});  // every rank has connected: the rendezvous keys are done with
  streak_.plans = 0;
  return in_force();
}

Driver::Next Driver::plan_failed(phase::Switching& p, const std::string& why, bool membership) {
  if (!membership && p.restore == Rung::sparse) sparse_restore_failed(p, why);
  cancel(Timer::plan);
  std::string detail = "plan " + std::to_string(p.number) + " not applied: " + why;
  note("plan_failed", detail, act::Level::warn);
  abort_ranks(p.ranks, p.step, detail);
  out_.push_back(act::EraseKeys{p.number});
  plane_spent_ = true;  // the ranks may have let go of the plan in force's data plane already
  if (membership) recovery_begins(detail);
  if (!membership && ++streak_.plans >= kMaxConsecutivePlanFailures)
    return fail_job(std::to_string(streak_.plans) + " plans in a row could not be applied; the last: " + why);
  arm(Timer::retry, kPlanRetryMs << std::min(streak_.plans, kPlanRetryDoublings));
  return phase::Retrying{false, why, {}, 0, {}};
}

// ---------- planning: retrying ----------

Driver::Next Driver::on_retry(const Event&) { return retry(std::move(std::get<phase::Retrying>(state_))); }

// The pause after an aborted step ends once a rank of that step is seen gone: the cause is known,
// and a plan made now cannot include it.
Driver::Next Driver::on_retry_view(const Event&) { return cause_seen(std::get<phase::Retrying>(state_)); }

Driver::Next Driver::cause_seen(phase::Retrying& r) {
  if (!r.after_abort) return std::nullopt;
  for (const auto& w : r.lost)
    if (contains(view_.ready, w)) return std::nullopt;
  for (const auto& w : r.ranks)
    if (!contains(view_.ready, w)) {
      cancel(Timer::retry);
      return retry(std::move(r));
    }
  return std::nullopt;
}

Driver::Next Driver::retry(phase::Retrying r) {
  if (!r.after_abort) return start_plan("again after: " + r.why);
  // A step that failed because a worker left (noticed by now) is not the step's fault: only
  // failures with the same workers count towards ending the job.
  streak_.steps = view_.ready == r.ranks ? streak_.steps + 1 : 0;
  if (streak_.steps >= kMaxConsecutiveFailures)
    return fail_job("step " + std::to_string(r.step) + " failed " + std::to_string(streak_.steps) +
                    " times in a row with the same workers; the last: " + r.why);
  return start_plan("step aborted: " + r.why);
}

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
  if (use != sorted(applied_->ranks)) {
    size_t joined = 0, left = 0;
    for (const auto& w : ready) joined += !contains(applied_->ranks, w);
    for (const auto& w : applied_->ranks) left += !contains(ready, w);
    std::string why = "workers changed: " + std::to_string(joined) + " joined, " + std::to_string(left) + " left";
    if (left > 0 || (!replaying() && join_batch_over(r))) {  // joins wait for a replay to end
      if (left > 0) recovery_begins(why);
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
  steps_.begin(view_.epoch, applied_->ranks);
  send(applied_->ranks, wire::StepBegin{view_.epoch, r.tally.step, applied_->number()});
}

Driver::Next Driver::on_vote(const Event& e) {
  const auto& v = std::get<in::Vote>(e).vote;
  auto& r = std::get<phase::Running>(state_);
  Participant p{v.node_id, v.index};
  if (v.ok)
    measured_.sparse_held(p, SparseHolding{v.sparse_bytes, v.sparse_from, v.sparse_to, v.sparse_copy_ms, v.step},
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
    if (v.loads.size() == t.loads.size())
      for (size_t i = 0; i < v.loads.size(); ++i) t.loads[i] += v.loads[i];
  }
  if (steps_.in_flight() && v.epoch != steps_.epoch())  // a node cut off in an older epoch
    note("stale_vote", "worker " + participant_name(p) + "'s vote for step " + std::to_string(v.step) + " of epoch " +
                           std::to_string(v.epoch) + " refused: the step in flight began in epoch " +
                           std::to_string(steps_.epoch()), act::Level::warn);
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
  out_.push_back(act::StepDone{rec});
  out_.push_back(act::Journal{rec::Commit{steps_.committed(), steps_.epoch()}, true});
  out_.push_back(act::Send{{}, true, wire::StepCommit{steps_.epoch(), r.tally.step}});
  committed(r, rec);
  return std::nullopt;
}

void Driver::announce_abort(const phase::Tally& t) {
  const std::string& why = steps_.last_abort_reason();
  note("step_aborted", "step " + std::to_string(t.step) + ": " + why, act::Level::warn);
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
  r.imbalance = expert_imbalance(t.loads, placement, size_t(cfg_.model.experts));
  return r;
}

void Driver::committed(phase::Running& r, const StepRecord& rec) {
  streak_.steps = 0;
  recovery_ends(r.tally.step);
  if (r.patch) {  // the plan's cross-group plane is spent and a group lost ranks: it re-plans now
    note("step_patched", "step " + std::to_string(r.tally.step) + " committed without " +
                             std::to_string(r.patch->lost.size()) + " lost worker(s), patched " +
                             std::to_string(r.patch->sent) + " time(s); group(s) re-plan next");
    r.patch.reset();
    plane_spent_ = true;
    wanted_ = Wanted{"re-plan after patched step " + std::to_string(r.tally.step), wanted_ && wanted_->with_loads};
  }
  measured_.step_committed(r.tally.loads, rec.step_ms / 1e3);
  maybe_snapshot();
  if (cfg_.max_steps > 0 && int64_t(steps_.committed()) >= cfg_.max_steps)
    note("steps_done", std::to_string(steps_.committed()) + " steps committed", act::Level::info, true);
  // The next step begins at the next turn: what the commit's hooks change (a drill's drain, say)
  // and what arrived meanwhile come first.
  out_.push_back(act::Committed{rec.step});
  arm(Timer::soon, 0);
}

// ---------- the end ----------

Driver::Next Driver::start_save(const std::string& said, bool after_stop) {
  if (cfg_.run_dir.empty() || !applied_) return end_job(said);
  phase::Saving s;
  s.done = said;
  s.after_stop = after_stop;
  s.dir = cfg_.run_dir + "/checkpoint";
  s.waiting = std::set<Participant>(applied_->ranks.begin(), applied_->ranks.end());
  send(applied_->ranks, wire::SaveCheckpoint{s.dir, steps_.committed(), applied_->number()});
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
  for (const auto& p : s.waiting)
    if (!contains(view_.ready, p)) return finish_save(s, false, "worker " + participant_name(p) + " left before it had saved");
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
  if (!s || !s->waiting.erase(p)) return std::nullopt;
  if (!d.ok) return finish_save(*s, false, "worker " + participant_name(p) + ": " + d.detail);
  s->units += d.units;
  if (!s->waiting.empty()) return std::nullopt;
  return finish_save(*s, true, "");
}

Driver::Next Driver::finish_save(phase::Saving& s, bool ok, const std::string& detail) {
  cancel(Timer::plan);
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

// ---------- helpers ----------

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
