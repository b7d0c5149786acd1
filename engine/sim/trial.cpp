// trial.cpp — see trial.h. One job on the event core: the cluster's events change who is up,
// the strategy says what a change means, and the job moves between four phases:
//   running     a step is in flight (its completion is an event)
//   paused      a recovery is in progress; training resumes at the pause's end
//   restarting  a restore: back to the checkpoint, restart, then the strategy starts afresh
//   waiting     too few nodes to run; resumes when enough return
// Every interruption bumps a generation number, so the completion events it made obsolete are
// recognised and dropped when they come up.
#include "sim/trial.h"

#include <algorithm>
#include <memory>

#include "sim/checkpointing.h"
#include "sim/cluster.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace sal::sim {
namespace {

enum EngineEvent : int { kStepDone = kFirstEngineEvent, kResume, kJoinBatch, kHorizon };
enum class Phase { running, paused, restarting, waiting, done };

constexpr uint64_t kCancelCheckEvery = 4096;

class Job {
 public:
  Job(const Scenario& s, const StrategySpec& spec, const Workload& w, Cluster& c, Strategy& st)
      : s_(s), spec_(spec), w_(w), c_(c), st_(&st), up_(c.size(), false) {}

  Status init();
  Result<TrialResult> run(const TrialOptions& o);

 private:
  // Strategies see the nodes as the engine has processed their changes (several changes at one
  // instant are taken one at a time).
  SimView view() const { return {s_, spec_, w_, up_, now_, step_}; }
  void log_live() { r_.live_log.push_back({now_, double(c_.live())}); }

  void begin_step(double at);
  void on_step_done();
  void on_changes(const std::vector<NodeChange>& changes);
  void on_down(uint32_t node);
  void on_up(uint32_t node);
  void on_resume();
  void apply(const Reaction& r);
  void interrupt();
  void pause_until(double t);
  void restore();
  void try_start(double extra_pause);
  bool goal_reached() const;
  void finish(bool finished);

  const Scenario& s_;
  const StrategySpec& spec_;
  const Workload& w_;
  Cluster& c_;
  Strategy* st_;
  std::vector<bool> up_;
  std::unique_ptr<CheckpointModel> ckpt_;
  EventQueue q_;
  TrialResult r_;
  Phase phase_ = Phase::waiting;
  double now_ = 0, step_started_ = 0, step_s_ = 0, resume_at_ = 0;
  int64_t step_ = 0;
  uint64_t gen_ = 0;
  bool joins_pending_ = false, join_batch_ = false, started_ = false;
  uint64_t plans0_ = 0;
  double plan_wall0_ = 0;
  std::vector<double> kept_;  // prefix sums of the kept steps' times (useful time)
};

Status Job::init() {
  c_.start(q_);
  up_ = c_.up();
  log_live();
  plans0_ = st_->plans;
  plan_wall0_ = st_->plan_wall_s;
  double iter_s = 0;
  // The fault-free step on every node, for the checkpoint model (oracle interval, MoEtion budget).
  if (st_->ready(view())) {
    if (auto st = st_->start(view()); !st) return fail(spec_.label, ": ", st.error().message());
    started_ = true;
    iter_s = st_->step_s(view());
  }
  auto m = CheckpointModel::make(spec_, s_, w_, iter_s > 0 ? iter_s : 1, st_->mean_time_between_restores(view()));
  if (!m) return m.error();
  ckpt_ = std::make_unique<CheckpointModel>(std::move(*m));
  kept_.assign(1, 0.0);
  return {};
}

void Job::begin_step(double at) {
  phase_ = Phase::running;
  step_started_ = at;
  step_s_ = st_->step_s(view());
  q_.schedule(at + step_s_, kStepDone, int64_t(gen_));
}

bool Job::goal_reached() const {
  if (s_.stop.steps > 0 && step_ >= s_.stop.steps) return true;
  return s_.stop.samples > 0 && r_.samples >= s_.stop.samples;
}

void Job::finish(bool finished) {
  phase_ = Phase::done;
  r_.finished = finished;
  r_.wall_s = now_;
}

void Job::on_step_done() {
  r_.running_s += step_s_;
  ++step_;
  kept_.push_back(kept_.back() + step_s_);
  r_.samples += s_.workload.samples_per_step;
  r_.samples_log.push_back({now_, s_.workload.samples_per_step});
  if (goal_reached()) return finish(true);
  double extra = ckpt_->cost_after(step_, step_s_);
  r_.checkpoint_s += extra;
  if (spec_.rebalance_every > 0 && step_ % spec_.rebalance_every == 0) {
    double p = st_->rebalance(view());
    extra += p;
    r_.paused_s += p;
    r_.rebalances += p > 0;
  }
  if (join_batch_) {
    join_batch_ = joins_pending_ = false;
    Reaction a = st_->adopt(view());
    if (a.kind == Reaction::Kind::reconfigure) {
      ++r_.joins;
      ++r_.reconfigurations;
      r_.paused_s += a.pause_s;
      phase_ = Phase::paused;
      return pause_until(now_ + extra + a.pause_s);
    }
    if (a.kind == Reaction::Kind::restore) return restore();
  }
  begin_step(now_ + extra);
}

void Job::interrupt() {
  if (phase_ == Phase::running) r_.running_s += now_ - step_started_;  // the partial step is wasted
  ++gen_;
}

void Job::pause_until(double t) {
  resume_at_ = t;
  q_.schedule(t, kResume, int64_t(gen_));
}

void Job::restore() {
  interrupt();
  ++r_.restores;
  auto point = ckpt_->restore(step_, step_s_ > 0 ? step_s_ : 1);
  int64_t lost = step_ - point.step;
  if (lost > 0) {
    r_.lost_steps += lost;
    r_.samples -= double(lost) * s_.workload.samples_per_step;
    r_.samples_log.push_back({now_, -double(lost) * s_.workload.samples_per_step});
    kept_.resize(size_t(point.step) + 1);
    step_ = point.step;
  }
  if (s_.failures.spares) {
    c_.replace_failed(now_, q_);
    up_ = c_.up();
    log_live();
  }
  phase_ = Phase::restarting;
  double pause = spec_.costs.restart_s + point.replay_s;
  r_.paused_s += pause;
  pause_until(now_ + pause);
}

void Job::try_start(double extra_pause) {
  if (!st_->ready(view())) {
    phase_ = Phase::waiting;
    return;
  }
  if (auto st = st_->start(view()); !st) {
    phase_ = Phase::waiting;
    return;
  }
  if (extra_pause > 0) {
    phase_ = Phase::paused;
    r_.paused_s += extra_pause;
    return pause_until(now_ + extra_pause);
  }
  begin_step(now_);
}

void Job::apply(const Reaction& r) {
  using K = Reaction::Kind;
  switch (r.kind) {
    case K::none: return;
    case K::masked:
      ++r_.masked;
      if (phase_ == Phase::running) {  // the in-flight step finishes later by the patch time
        ++gen_;
        r_.paused_s += r.pause_s;
        q_.schedule(step_started_ + step_s_ + r.pause_s, kStepDone, int64_t(gen_));
        step_started_ += r.pause_s;
      }
      return;
    case K::reconfigure:
      ++r_.reconfigurations;
      interrupt();
      if (phase_ == Phase::paused) r_.paused_s -= std::max(0.0, resume_at_ - now_);  // the old pause is replaced
      phase_ = Phase::paused;
      r_.paused_s += r.pause_s;
      return pause_until(now_ + r.pause_s);
    case K::restore: return restore();
    case K::wait:
      interrupt();
      phase_ = Phase::waiting;
      return;
  }
}

void Job::on_down(uint32_t node) {
  ++r_.failures;
  FailureRecord rec{now_, node, "ignored", -1, -1};
  if (phase_ == Phase::restarting || phase_ == Phase::waiting || phase_ == Phase::done) {
    rec.outcome = phase_ == Phase::restarting ? "during-restart" : "waiting";
  } else {
    Reaction r = st_->on_down(view(), node);
    rec.failures_absorbed = r.failures_absorbed;
    rec.p_survive = r.p_survive;
    static const char* kNames[] = {"ignored", "masked", "reconfigured", "restored", "waiting"};
    rec.outcome = kNames[int(r.kind)];
    apply(r);
  }
  r_.failure_log.push_back(rec);
}

void Job::on_up(uint32_t node) {
  if (phase_ == Phase::waiting) return try_start(spec_.costs.plan_s + spec_.costs.rebuild_s);
  if (phase_ == Phase::restarting || phase_ == Phase::done || joins_pending_ || !st_->wants(view(), node)) return;
  joins_pending_ = true;
  q_.schedule(now_ + spec_.costs.join_batch_s, kJoinBatch);
}

void Job::on_changes(const std::vector<NodeChange>& changes) {
  if (changes.empty()) return;
  log_live();
  for (const auto& ch : changes) {
    up_[ch.node] = ch.up;
    ch.up ? on_up(ch.node) : on_down(ch.node);
  }
}

void Job::on_resume() {
  if (phase_ == Phase::restarting) return try_start(0);
  st_->resumed(view());
  begin_step(now_);
}

Result<TrialResult> Job::run(const TrialOptions& o) {
  q_.schedule(s_.stop.horizon_s, kHorizon);
  if (started_) begin_step(0);
  while (phase_ != Phase::done && !q_.empty()) {
    Event e = q_.pop();
    now_ = e.time;
    if (o.cancel && q_.popped() % kCancelCheckEvery == 0 && o.cancel->load()) return fail("cancelled");
    switch (e.kind) {
      case kStepDone:
        if (uint64_t(e.a) == gen_ && phase_ == Phase::running) on_step_done();
        break;
      case kResume:
        if (uint64_t(e.a) == gen_ && (phase_ == Phase::paused || phase_ == Phase::restarting)) on_resume();
        break;
      case kJoinBatch:
        join_batch_ = true;
        break;
      case kHorizon: finish(!(s_.stop.steps > 0 || s_.stop.samples > 0)); break;
      default: on_changes(c_.handle(e, q_));
    }
  }
  if (phase_ != Phase::done) finish(false);
  r_.steps = step_;
  r_.checkpoint = ckpt_->describe();
  r_.useful_s = kept_.back();
  r_.waiting_s = std::max(0.0, r_.wall_s - r_.running_s - r_.paused_s - r_.checkpoint_s);
  r_.ettr = r_.wall_s > 0 ? r_.useful_s / r_.wall_s : 0;
  r_.availability = r_.wall_s > 0 ? r_.running_s / r_.wall_s : 0;
  r_.plans = st_->plans - plans0_;
  r_.plan_wall_s = st_->plan_wall_s - plan_wall0_;
  r_.events = q_.popped();
  return std::move(r_);
}

}  // namespace

Result<TrialResult> run_trial(const Scenario& s, size_t index, const Workload& w, Strategy& st, const TrialOptions& o) {
  if (index >= s.strategies.size()) return fail("no strategy ", index);
  auto c = Cluster::make(s, o.trial);
  if (!c) return c.error();
  Job job(s, s.strategies[index], w, *c, st);
  if (auto ok = job.init(); !ok) return ok.error();
  return job.run(o);
}

Result<TrialResult> run_trial(const Scenario& s, size_t index, const TrialOptions& o) {
  if (index >= s.strategies.size()) return fail("no strategy ", index);
  auto w = Workload::make(s);
  if (!w) return w.error();
  auto st = make_strategy(s.strategies[index], s);
  if (!st) return st.error();
  return run_trial(s, index, *w, **st, o);
}

}  // namespace sal::sim
