// driver.cpp — see driver.h: the driver's construction and what it shows, the handlers of every
// phase (a plan request, a stop), gathering, and the helpers that make actions. The other phases:
// planning (deciding, switching, retrying) in driver_plan.cpp, running and the end in
// driver_steps.cpp; the recovery half — restores, reconciliation, the recovery bookkeeping,
// snapshots — in driver_recovery.cpp; SPARe's patch in driver_patch.cpp.
#include "job/driver.h"

#include <algorithm>

#include "core/devices.h"

namespace sal::job {

// Dense snapshots kept on disk.
constexpr size_t kSnapshotsKept = 2;

namespace {

std::vector<NodeId> nodes_of(const std::vector<Participant>& ranks) {
  std::vector<NodeId> nodes;
  for (const auto& r : ranks)
    if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) nodes.push_back(r.node);
  return nodes;
}

}  // namespace

std::string ms_text(int64_t ns) {
  return ns >= 10'000'000'000 ? std::to_string(ns / 1'000'000'000) + " s" : std::to_string(ns / 1'000'000) + " ms";
}

DriverConfig DriverConfig::from(const JobConfig& job, int64_t max_steps, const std::string& run_dir, int64_t origin_ns) {
  DriverConfig c;
  c.model = model_shape(job.model);
  auto devices = parse_devices(job.mesh.devices);
  c.expected_workers = uint32_t(job.mesh.nodes) * uint32_t(devices ? devices->size() : 1);
  c.join_window_ms = job.mesh.join_window_ms;
  c.join_batch_ms = job.mesh.join_batch_ms;
  c.capacity_wait_ms = job.mesh.capacity_wait_ms;
  c.rebalance_every = job.train.rebalance_every;
  c.checkpoint_every = job.train.checkpoint_every;
  c.peer_copies = uint32_t(sparse_peer_copies(job));
  c.expert_logs = job.train.expert_logs;
  c.peer_memory = uint64_t(job.train.peer_memory_mb) << 20;
  c.max_steps = max_steps;
  c.recovery = job.train.recovery;
  c.relaunch = job.train.recovery != "elastic" && job.train.restart == "relaunch";
  c.dispatch_by_counts = job.train.dispatch == "counts";
  c.record_routing = job.train.record_routing;
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
  for (Timer t : {Timer::gate, Timer::plan, Timer::retry, Timer::capacity}) cancel(t);
  if (auto* p = std::get_if<phase::Switching>(&state_))
    abort_ranks(p->ranks, p->step, std::string(kStopReason) + stop.why, p->number);
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

// ---------- helpers ----------

void Driver::note(std::string kind, std::string detail, act::Level level, bool quiet) {
  out_.push_back(act::Note{std::move(kind), std::move(detail), level, quiet});
}

void Driver::send(const std::vector<Participant>& ranks, act::Message msg) {
  out_.push_back(act::Send{nodes_of(ranks), false, std::move(msg)});
}

void Driver::abort_ranks(const std::vector<Participant>& ranks, uint64_t step, const std::string& why, uint64_t plan) {
  send(ranks, wire::StepAbort{steps_.epoch(), step, why, plan});
}

}  // namespace sal::job
