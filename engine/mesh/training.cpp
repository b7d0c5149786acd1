// training.cpp — see training.h.
#include "mesh/training.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "comm/store_server.h"
#include "mesh/security.h"
#include "core/clock.h"
#include "core/devices.h"
#include "core/paths.h"
#include "mesh/controller.h"
#include "mesh/planner.h"
#include "mesh/recovery_modes.h"
#include "plan/fixed_ep.h"

namespace sal::mesh {

// How long every participant has to connect a new plan's data plane and move its state.
constexpr uint64_t kPlanTimeoutMs = 60000;
// A failed plan is tried again after this pause, doubled after each failure in a row up to 16x
// (deaths that caused it get noticed meanwhile, and a worker still stuck connecting an abandoned
// plan's data plane gets time to give up).
constexpr uint64_t kPlanRetryMs = 200;
constexpr int kPlanRetryDoublings = 4;
// After an aborted step, the pause before planning again, for the same reason.
constexpr uint64_t kAbortSettleMs = 50;
// Steps failing this many times in a row with the same workers end the job; plans, a few more
// (a plan's rendezvous can time out behind a worker still leaving an abandoned one).
constexpr int kMaxConsecutiveFailures = 3;
constexpr int kMaxConsecutivePlanFailures = 5;
// How long the final checkpoint may take.
constexpr uint64_t kSaveTimeoutMs = 120000;

namespace {

std::string who(const Participant& p) { return std::to_string(p.node) + "." + std::to_string(p.index); }

// "tcp://10.0.0.5:7000" -> "tcp://10.0.0.5:*"; other transports get their own ipc path.
std::string store_bind(const std::string& mesh_endpoint) {
  auto colon = mesh_endpoint.rfind(':');
  if (mesh_endpoint.rfind("tcp://", 0) == 0 && colon != std::string::npos && colon > 5)
    return mesh_endpoint.substr(0, colon) + ":*";
  return "tcp://127.0.0.1:*";
}

bool same_plan(const plan::Plan& a, const plan::Plan& b) {
  if (a.nodes != b.nodes || a.slots != b.slots || a.layers.size() != b.layers.size()) return false;
  for (size_t l = 0; l < a.layers.size(); ++l)
    if (a.layers[l].placement != b.layers[l].placement) return false;
  return true;
}

}  // namespace

Training::Training(Controller& c)
    : c_(c),
      loads_(size_t(c.job().model.layers), size_t(c.job().model.experts),
             size_t(std::max<int64_t>(c.job().train.rebalance_every, 1))),
      gate_timer_(c.loop_),
      plan_timer_(c.loop_),
      retry_timer_(c.loop_),
      join_timer_(c.loop_),
      soon_timer_(c.loop_) {}

Training::~Training() = default;

const char* Training::phase_name(Phase p) {
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

Status Training::start() {
  std::string bind = store_bind(c_.mesh_endpoint());
  store_ = std::make_unique<comm::StoreServer>(c_.ctx_, bind,
                                               comm::StoreServerOptions{{}, store_server_hook(bind, c_.server_key_.get())});
  auto ep = store_->start();
  if (!ep) return ep.error().with_context("rendezvous store");
  store_endpoint_ = *ep;
  const auto& run_dir = c_.opts_.run_dir;
  if (!run_dir.empty()) {
    SAL_TRY(metrics_.open_csv(run_dir + "/metrics.csv"));
    SAL_TRY(record_.open(run_dir));
    const auto& m = c_.job().model;
    if (c_.job().train.checkpoint_every > 0)
      snapshots_ = std::make_unique<SnapshotBook>(run_dir + "/snapshots",
                                                  uint32_t(1 + 2 * m.layers + m.layers * m.experts));
  }
  set_phase(Phase::gathering);
  return {};
}

double Training::now_s() const { return double(mono_ns() - c_.started_ns()) / 1e9; }

void Training::set_phase(Phase p, const std::string& detail) {
  phase_ = p;
  switch (p) {
    case Phase::gathering: return record_.phase("wait", now_s(), detail);
    case Phase::planning: return record_.phase("reconfigure", now_s(), detail);
    case Phase::running: return record_.phase("compute", now_s(), detail);
    case Phase::saving: return record_.phase("save", now_s(), detail);
    case Phase::done:
    case Phase::failed: return record_.close(now_s());
  }
}

std::vector<Participant> Training::ready_participants() const {
  std::vector<Participant> out;
  for (const auto& [id, n] : c_.membership().nodes()) {
    if (!n.usable()) continue;
    for (const auto& w : n.workers)
      if (!w.exited && w.state == wire::WorkerState::ready) out.push_back({id, w.index});
  }
  return out;  // sorted: nodes in id order, workers in index order
}

size_t Training::expected_workers() const {
  auto devices = parse_devices(c_.job().mesh.devices);
  return size_t(c_.job().mesh.nodes) * (devices ? devices->size() : 1);
}

void Training::poke() {
  if (in_poke_ || c_.stopping()) return;
  in_poke_ = true;
  switch (phase_) {
    case Phase::gathering: gather(); break;
    case Phase::planning: check_pending(); break;
    case Phase::running:
      if (!c_.steps_.in_flight()) boundary();
      break;
    case Phase::saving: {
      auto ready = ready_participants();
      for (const auto& p : save_waiting_)
        if (std::find(ready.begin(), ready.end(), p) == ready.end()) {
          finish_save(false, "worker " + who(p) + " left before it had saved");
          break;
        }
      break;
    }
    default: break;
  }
  in_poke_ = false;
}

// ---------- gathering ----------

void Training::gather() {
  auto ready = ready_participants();
  if (ready.empty()) {
    gather_since_ns_ = 0;
    if (auto why = none_could_start(); !why.empty() && !applied_) fail_job("no worker could start: " + why);
    return;
  }
  int64_t window_ms = c_.job().mesh.join_window_ms;
  if (gather_since_ns_ == 0) {
    gather_since_ns_ = mono_ns();
    gate_timer_.start(uint64_t(window_ms), 0, [this] { poke(); });
  }
  size_t expected = expected_workers();
  bool window_over = mono_ns() - gather_since_ns_ >= window_ms * 1'000'000;
  if (ready.size() < expected && !window_over) return;
  gate_timer_.stop();
  start_plan(ready.size() >= expected
                 ? "start: " + std::to_string(ready.size()) + " workers ready"
                 : "start: join window over with " + std::to_string(ready.size()) + " of " +
                       std::to_string(expected) + " workers");
}

// Before the first plan: when every worker that was started has exited, and one of them failed,
// the job cannot start (a missing corpus, a job the workers cannot evaluate): the first failure.
std::string Training::none_could_start() const {
  std::string first_failure;
  size_t workers = 0;
  for (const auto& [id, n] : c_.membership().nodes()) {
    if (!n.usable()) continue;
    for (const auto& w : n.workers) {
      ++workers;
      if (!w.exited) return "";
      if ((w.exit_code != 0 || w.signal != 0) && first_failure.empty()) first_failure = "worker " + who({id, w.index}) + " " + w.detail;
    }
  }
  return workers > 0 ? first_failure : "";
}

// ---------- plans ----------

void Training::request_plan(const std::string& why, bool use_loads) {
  plan_wanted_ = true;
  plan_with_loads_ = plan_with_loads_ || use_loads;
  plan_reason_ = why;
  soon_timer_.start(0, 0, [this] { poke(); });  // not inside the caller (a REPL evaluation, say)
}

void Training::start_plan(const std::string& why) {
  retry_timer_.stop();
  plan_timer_.stop();
  if (pending_) {  // a plan in flight that a newer one replaces: its ranks stop waiting for it
    abort_nodes(pending_->ranks, pending_->step, "plan " + std::to_string(pending_->number) + " replaced: " + why);
    erase_plan_keys(pending_->number);
    pending_.reset();
  }
  auto ready = ready_participants();
  if (ready.empty()) {
    set_phase(Phase::gathering);
    gather_since_ns_ = 0;
    return;
  }
  set_phase(Phase::planning, why);
  if (snapshots_)
    for (uint64_t s : snapshots_->drop_waiting_on_lost(ready))
      c_.events_.add("snapshot_dropped", kNoNode, c_.membership().epoch(),
                     "the snapshot of step " + std::to_string(s) + " cannot complete: a rank writing it left");
  if (plan_with_loads_ && !loads_.empty()) c_.planner().loads = loads_.mean();
  plan_wanted_ = plan_with_loads_ = false;
  uint64_t step = c_.steps_.committed();
  Epoch epoch = c_.membership().epoch();
  const auto& job = c_.job();
  uint32_t ep = plan::ep_size(uint32_t(job.model.experts), uint32_t(job.policies.slots));
  auto choice = choose_workers(job.train.recovery, ep, ready, applied_, step);
  if (choice.use.empty()) {
    c_.events_.add("plan_failed", kNoNode, epoch, why + ": " + choice.why);
    spdlog::warn("no plan: {}; waiting for more workers", choice.why);
    set_phase(Phase::gathering);
    gather_since_ns_ = 0;
    return;
  }
  auto rec = decide_plan(choice.use.size(), epoch);
  if (!rec) {
    c_.events_.add("plan_failed", kNoNode, epoch, why + ": " + rec.error().message());
    spdlog::warn("no plan for {} workers: {}; waiting for more", choice.use.size(), rec.error().message());
    set_phase(Phase::gathering);
    gather_since_ns_ = 0;
    return;
  }
  c_.events_.add("plan", kNoNode, epoch,
                 "plan " + std::to_string(rec->number) + " for " + std::to_string(choice.use.size()) + " workers (" +
                     why + "): allocation by " + rec->allocation_by + ", placement by " + rec->placement_by +
                     (rec->note.empty() ? "" : "; " + rec->note));
  if (rec->plan.floor < uint32_t(job.policies.min_replicas) && job.train.recovery == "elastic") {
    std::string detail = "plan " + std::to_string(rec->number) + " guarantees " + std::to_string(rec->plan.floor) +
                         " replicas per expert, below policies.min_replicas = " + std::to_string(job.policies.min_replicas) +
                         " (" + std::to_string(choice.use.size()) + " workers x " + std::to_string(job.policies.slots) +
                         " slots)" + (rec->note.empty() ? "" : ": " + rec->note);
    c_.events_.add("floor_lowered", kNoNode, epoch, detail);
    spdlog::warn("{}", detail);
  }
  if (choice.restore) return start_restore(*rec, choice.use, choice.why);
  auto sw = switch_plan(applied_, choice.use, rec->plan, step);
  if (!sw) return fail_job("plan " + std::to_string(rec->number) + ": " + sw.error().message());
  if (applied_ && applied_->ranks == sw->ranks && same_plan(applied_->plan, rec->plan)) {
    c_.events_.add("plan_kept", kNoNode, epoch,
                   "plan " + std::to_string(rec->number) + " places every expert as plan " +
                       std::to_string(applied_->number) + " does; plan " + std::to_string(applied_->number) + " stays");
    applied_->from_step = step;
    set_phase(Phase::running);
    return boundary();
  }
  Pending p{rec->number, step, sw->ranks, rec->plan, *sw, {}, why, mono_ns(), 0};
  begin_switch(std::move(p), plan_update(rec->number, epoch, step, *sw, rec->plan, store_endpoint_));
}

Result<PlanRecord> Training::decide_plan(size_t workers, Epoch epoch) {
  const auto& job = c_.job();
  if (job.train.recovery == "elastic") {
    in_poke_ = true;  // the policies may take a while; the mesh is serviced meanwhile, not re-planned
    auto rec = c_.planner().replan(uint32_t(workers), epoch);
    in_poke_ = false;
    return rec;
  }
  uint32_t ep = plan::ep_size(uint32_t(job.model.experts), uint32_t(job.policies.slots));
  return c_.planner().fixed_ep(uint32_t(workers) / ep, epoch);
}

void Training::begin_switch(Pending p, wire::PlanUpdate u) {
  pending_ = std::move(p);
  pending_->waiting.insert(pending_->ranks.begin(), pending_->ranks.end());
  send_plan(u, pending_->ranks);
  plan_timer_.start(kPlanTimeoutMs, 0, [this] {
    plan_failed("not every worker connected and moved its state within " + std::to_string(kPlanTimeoutMs) + " ms");
  });
}

void Training::send_plan(const wire::PlanUpdate& u, const std::vector<Participant>& ranks) {
  if (c_.on_plan_sending) c_.on_plan_sending(u);
  std::set<NodeId> nodes;
  for (const auto& r : ranks) nodes.insert(r.node);
  for (NodeId id : nodes)
    if (const Node* n = c_.membership().find(id)) c_.send_to(n->routing_id, u);
}

void Training::on_plan_ready(const wire::PlanReady& r) {
  if (!pending_ || r.plan != pending_->number) return;  // an abandoned plan's late answer
  Participant p{r.node_id, r.index};
  if (!pending_->waiting.count(p)) return;
  if (!r.ok) return plan_failed("worker " + who(p) + ": " + r.detail);
  pending_->waiting.erase(p);
  pending_->slowest_ms = std::max(pending_->slowest_ms, r.ms);
  pending_->slowest_connect_ms = std::max(pending_->slowest_connect_ms, r.connect_ms);
  pending_->slowest_migrate_ms = std::max(pending_->slowest_migrate_ms, r.migrate_ms);
  if (pending_->waiting.empty()) plan_applied();
}

void Training::plan_applied() {
  Pending p = std::move(*pending_);
  pending_.reset();
  plan_timer_.stop();
  uint64_t previous = applied_ ? applied_->number : 0;
  applied_ = AppliedPlan{p.number, p.ranks, p.plan, p.step};
  std::string detail = "plan " + std::to_string(p.number) + " in force from step " + std::to_string(p.step) + " on " +
                       std::to_string(p.ranks.size()) + " workers: " + std::to_string(p.sw.experts_moved) +
                       " expert replicas moved, " + std::to_string(p.sw.experts_kept) + " kept, " +
                       std::to_string(p.sw.dense_moved) + " dense units sent to new workers; " +
                       std::to_string(int64_t((mono_ns() - p.started_ns) / 1'000'000)) + " ms (slowest worker: connect " +
                       std::to_string(int64_t(p.slowest_connect_ms)) + " ms, migrate " +
                       std::to_string(int64_t(p.slowest_migrate_ms)) + " ms)";
  c_.events_.add("plan_applied", kNoNode, c_.membership().epoch(), detail);
  spdlog::info("{}", detail);
  if (p.restore) {
    std::string restored = "restored " + p.restore_from + " on " + std::to_string(p.ranks.size()) + " workers in " +
                           std::to_string(int64_t((mono_ns() - p.started_ns) / 1'000'000)) + " ms; training goes on from step " +
                           std::to_string(p.step);
    c_.events_.add("restored", kNoNode, c_.membership().epoch(), restored);
    record_.restored();
    spdlog::info("{}", restored);
  }
  record_.plan(*applied_, now_s(), loads_.empty() ? std::vector<std::vector<double>>{} : loads_.mean());
  if (previous) erase_plan_keys(previous);
  erase_plan_keys(p.number);  // every rank has connected: the rendezvous keys are done with
  plan_failures_ = 0;
  set_phase(Phase::running);
  if (c_.on_change) c_.on_change();
  boundary();
}

void Training::plan_failed(const std::string& why, bool membership) {
  if (!pending_) return;
  Pending p = std::move(*pending_);
  pending_.reset();
  plan_timer_.stop();
  std::string detail = "plan " + std::to_string(p.number) + " not applied: " + why;
  c_.events_.add("plan_failed", kNoNode, c_.membership().epoch(), detail);
  spdlog::warn("{}", detail);
  abort_nodes(p.ranks, p.step, detail);
  erase_plan_keys(p.number);
  if (membership) recovery_begins(detail);
  if (!membership && ++plan_failures_ >= kMaxConsecutivePlanFailures)
    return fail_job(std::to_string(plan_failures_) + " plans in a row could not be applied; the last: " + why);
  uint64_t pause = kPlanRetryMs << std::min(plan_failures_, kPlanRetryDoublings);
  retry_timer_.start(pause, 0, [this, why] { start_plan("again after: " + why); });
}

// A pending plan whose ranks are not all still ready can never complete.
void Training::check_pending() {
  if (!pending_) return;
  auto ready = ready_participants();
  for (const auto& r : pending_->ranks)
    if (std::find(ready.begin(), ready.end(), r) == ready.end()) return plan_failed("worker " + who(r) + " left", true);
}

void Training::abort_nodes(const std::vector<Participant>& ranks, uint64_t step, const std::string& why) {
  std::set<NodeId> nodes;
  for (const auto& r : ranks) nodes.insert(r.node);
  for (NodeId id : nodes)
    if (const Node* n = c_.membership().find(id); n && (n->live() || n->state == NodeState::draining))
      c_.send_to(n->routing_id, wire::StepAbort{c_.steps_.epoch(), step, why});
}

void Training::erase_plan_keys(uint64_t number) {
  if (store_) store_->erase_prefix("plan-" + std::to_string(number) + "/");
}

// ---------- steps ----------

// Only between steps under a plan in force: a hook that changed the membership inside committed()
// (a drill's drain) may already have started the next plan.
void Training::boundary() {
  if (c_.stopping() || !applied_ || phase_ != Phase::running || pending_) return;
  uint64_t done = c_.steps_.committed();
  int64_t max_steps = c_.max_steps();
  if (max_steps > 0 && int64_t(done) >= max_steps) return start_save();
  auto ready = ready_participants();
  auto ranks = applied_->ranks;
  std::sort(ranks.begin(), ranks.end());
  const auto& job = c_.job();
  uint32_t ep = plan::ep_size(uint32_t(job.model.experts), uint32_t(job.policies.slots));
  auto use = choose_workers(job.train.recovery, ep, ready, applied_, done).use;  // the baselines idle some
  std::sort(use.begin(), use.end());
  if (use != ranks) {
    size_t joined = 0, left = 0;
    for (const auto& r : ready) joined += std::find(applied_->ranks.begin(), applied_->ranks.end(), r) == applied_->ranks.end();
    for (const auto& r : applied_->ranks) left += std::find(ready.begin(), ready.end(), r) == ready.end();
    std::string why = "workers changed: " + std::to_string(joined) + " joined, " + std::to_string(left) + " left";
    if (left > 0 || join_batch_over()) {
      join_seen_ns_ = 0;
      if (left > 0) recovery_begins(why);
      return start_plan(why);
    }
  } else {
    join_seen_ns_ = 0;
  }
  if (plan_wanted_) return start_plan(plan_reason_);
  int64_t every = c_.job().train.rebalance_every;
  if (every > 0 && done > applied_->from_step && int64_t(done - applied_->from_step) >= every) {
    plan_with_loads_ = true;
    return start_plan("rebalance: " + std::to_string(every) + " steps under plan " + std::to_string(applied_->number));
  }
  if (max_steps > 0) begin_step();
}

// Joins wait mesh.join_batch_ms from the first of them; meanwhile training goes on under the plan
// in force (the timer covers a job with no step running).
bool Training::join_batch_over() {
  int64_t batch_ms = c_.job().mesh.join_batch_ms;
  if (join_seen_ns_ == 0) {
    join_seen_ns_ = mono_ns();
    if (batch_ms > 0) join_timer_.start(uint64_t(batch_ms), 0, [this] { poke(); });
  }
  return mono_ns() - join_seen_ns_ >= batch_ms * 1'000'000;
}

void Training::begin_step() {
  tally_ = Tally{};
  tally_.step = c_.steps_.next_step();
  tally_.loads.assign(size_t(c_.job().model.layers * c_.job().model.experts), 0);
  tally_.begun_ns = mono_ns();
  voted_.clear();
  c_.steps_.begin(c_.membership().epoch(), applied_->ranks);
  wire::StepBegin msg{c_.membership().epoch(), tally_.step, applied_->number};
  std::set<NodeId> nodes;
  for (const auto& p : applied_->ranks) nodes.insert(p.node);
  for (NodeId id : nodes) c_.send_to(c_.membership().find(id)->routing_id, msg);
}

void Training::on_vote(const wire::StepVote& v) {
  Participant p{v.node_id, v.index};
  if (!v.ok || v.step != tally_.step || !c_.steps_.in_flight() || !c_.steps_.participants().count(p) ||
      !voted_.insert(p).second)
    return;
  tally_.ce += v.ce_sum;
  tally_.tokens += v.tokens;
  tally_.aux = v.aux;
  tally_.grad_norm = v.grad_norm;
  tally_.lr = v.lr;
  tally_.compute_ms = std::max(tally_.compute_ms, v.compute_ms);
  if (v.loads.size() == tally_.loads.size())
    for (size_t i = 0; i < v.loads.size(); ++i) tally_.loads[i] += v.loads[i];
}

void Training::outcome(StepCoordinator::Outcome o) {
  using O = StepCoordinator::Outcome;
  if (o == O::committed) {
    c_.broadcast(wire::StepCommit{c_.steps_.epoch(), tally_.step});
    committed();
  } else if (o == O::aborted) {
    const std::string& why = c_.steps_.last_abort_reason();
    c_.events_.add("step_aborted", kNoNode, c_.membership().epoch(), "step " + std::to_string(tally_.step) + ": " + why);
    spdlog::warn("step {} aborted: {}", tally_.step, why);
    c_.broadcast(wire::StepAbort{c_.steps_.epoch(), tally_.step, why});
    if (c_.stopping()) return;
    recovery_begins("step " + std::to_string(tally_.step) + " aborted: " + why);
    set_phase(Phase::planning);  // its data plane is spent: the next step needs a plan
    auto ranks = applied_ ? applied_->ranks : std::vector<Participant>{};
    std::sort(ranks.begin(), ranks.end());
    uint64_t step = tally_.step;
    retry_timer_.start(kAbortSettleMs, 0, [this, why, ranks, step] {
      // A step that failed because a worker left (noticed by now) is not the step's fault: only
      // failures with the same workers count towards ending the job.
      step_failures_ = ready_participants() == ranks ? step_failures_ + 1 : 0;
      if (step_failures_ >= kMaxConsecutiveFailures)
        return fail_job("step " + std::to_string(step) + " failed " + std::to_string(step_failures_) +
                        " times in a row with the same workers; the last: " + why);
      start_plan("step aborted: " + why);
    });
  }
}

void Training::committed() {
  step_failures_ = 0;
  recovery_ends(tally_.step);
  StepRecord r;
  r.step = tally_.step;
  r.tokens = tally_.tokens;
  r.ce = tally_.tokens ? tally_.ce / double(tally_.tokens) : 0;
  r.aux = tally_.aux;
  r.loss = r.ce + r.aux;
  r.grad_norm = tally_.grad_norm;
  r.lr = tally_.lr;
  r.step_ms = double(mono_ns() - tally_.begun_ns) / 1e6;
  r.compute_ms = tally_.compute_ms;
  r.tokens_per_s = r.step_ms > 0 ? double(r.tokens) / (r.step_ms / 1e3) : 0;
  r.workers = uint32_t(applied_->ranks.size());
  r.plan = applied_->number;
  r.time_s = double(mono_ns() - c_.started_ns()) / 1e9;
  std::vector<std::vector<std::vector<uint32_t>>> placement;
  for (const auto& layer : applied_->plan.layers) placement.push_back(layer.placement);
  r.imbalance = expert_imbalance(tally_.loads, placement, size_t(c_.job().model.experts));
  metrics_.add(r);
  loads_.add(tally_.loads);
  maybe_snapshot();
  if (c_.on_committed) c_.on_committed(r.step);
  int64_t max_steps = c_.max_steps();
  if (max_steps > 0 && int64_t(c_.steps_.committed()) >= max_steps)
    c_.events_.add("steps_done", kNoNode, c_.membership().epoch(), std::to_string(c_.steps_.committed()) + " steps committed");
  boundary();
}

// ---------- the end ----------

void Training::start_save() {
  std::string done = "completed " + std::to_string(c_.steps_.committed()) + " steps";
  if (c_.opts_.run_dir.empty() || !applied_) {
    set_phase(Phase::done);
    return c_.request_stop(done);
  }
  set_phase(Phase::saving);
  checkpoint_dir_ = c_.opts_.run_dir + "/checkpoint";
  saved_units_ = 0;
  save_waiting_ = std::set<Participant>(applied_->ranks.begin(), applied_->ranks.end());
  wire::SaveCheckpoint msg{checkpoint_dir_, c_.steps_.committed(), applied_->number};
  std::set<NodeId> nodes;
  for (const auto& p : applied_->ranks) nodes.insert(p.node);
  for (NodeId id : nodes) c_.send_to(c_.membership().find(id)->routing_id, msg);
  plan_timer_.start(kSaveTimeoutMs, 0, [this] { finish_save(false, "not every worker saved in time"); });
}

void Training::on_save_done(const wire::SaveDone& d) {
  if (d.snapshot) return on_snapshot_done(d);
  Participant p{d.node_id, d.index};
  if (phase_ != Phase::saving || !save_waiting_.erase(p)) return;
  if (!d.ok) return finish_save(false, "worker " + who(p) + ": " + d.detail);
  saved_units_ += d.units;
  if (save_waiting_.empty()) finish_save(true, "");
}

void Training::finish_save(bool ok, const std::string& detail) {
  if (phase_ != Phase::saving) return;
  plan_timer_.stop();
  std::string done = "completed " + std::to_string(c_.steps_.committed()) + " steps";
  if (!ok) return fail_job(done + ", but the checkpoint was not written: " + detail);
  c_.events_.add("checkpoint_saved", kNoNode, c_.membership().epoch(),
                 std::to_string(saved_units_) + " units of step " + std::to_string(c_.steps_.committed()) + " in " +
                     checkpoint_dir_);
  spdlog::info("checkpoint of step {} written to {} ({} units)", c_.steps_.committed(), checkpoint_dir_, saved_units_);
  set_phase(Phase::done);
  c_.request_stop(done);
}

void Training::fail_job(const std::string& why) {
  if (phase_ == Phase::failed) return;
  set_phase(Phase::failed);
  failure_ = why;
  pending_.reset();
  plan_timer_.stop();
  retry_timer_.stop();
  c_.events_.add("job_failed", kNoNode, c_.membership().epoch(), why);
  spdlog::error("training cannot go on: {}", why);
  c_.request_stop("failed: " + why);
}

void Training::stop(const std::string& why) {
  gate_timer_.stop();
  plan_timer_.stop();
  retry_timer_.stop();
  if (pending_) {
    abort_nodes(pending_->ranks, pending_->step, "job stopping: " + why);
    pending_.reset();
  }
  outcome(c_.steps_.abort("job stopping: " + why));
  if (phase_ != Phase::failed && phase_ != Phase::saving) set_phase(Phase::done);
}

}  // namespace sal::mesh
