// export.cpp — see export.h.
#include "metrics/export.h"

#include <type_traits>

namespace sal::metrics {
namespace {

// Recoveries: the target is ~150 ms, Lazarus takes 20-40 s, a dense restore minutes.
const prometheus::Histogram::BucketBoundaries kRecoveryBuckets{0.05, 0.1, 0.15, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300};
// Decisions: a Lua policy takes well under a millisecond to a few; policies.budget_ms (500 ms
// by default) stops it.
const prometheus::Histogram::BucketBoundaries kDecisionBuckets{1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025,
                                                               0.05, 0.1, 0.25, 0.5, 1};

// A counter that mirrors a total kept elsewhere: advanced to it (totals never go back; a counter
// must not either).
void advance(prometheus::Counter& c, double total) {
  double now = c.Value();
  if (total > now) c.Increment(total - now);
}

}  // namespace

// A family of `T` named `name`, every series of it labelled with the job.
template <class T>
prometheus::Family<T>& MetricsExport::family(const std::string& name, const std::string& help) {
  auto build = [] {
    if constexpr (std::is_same_v<T, prometheus::Gauge>) return prometheus::BuildGauge();
    else if constexpr (std::is_same_v<T, prometheus::Counter>) return prometheus::BuildCounter();
    else return prometheus::BuildHistogram();
  };
  return build().Name(name).Help(help).Labels(job_label_).Register(*registry_);
}

prometheus::Gauge& MetricsExport::gauge(const std::string& name, const std::string& help) {
  return family<prometheus::Gauge>(name, help).Add({});
}

prometheus::Counter& MetricsExport::counter(const std::string& name, const std::string& help) {
  return family<prometheus::Counter>(name, help).Add({});
}

MetricsExport::MetricsExport(const std::string& job_name)
    : registry_(std::make_shared<prometheus::Registry>()), job_label_{{"job_name", job_name}} {
  add_training();
  add_membership();
  add_recovery();
  add_policies();
  events_ = &family<prometheus::Counter>(
      "salamander_events_total", "Events logged (events.csv, job.events()) by kind: joins, deaths, plans, aborted steps, ...");
}

void MetricsExport::add_training() {
  step_ = &gauge("salamander_step", "Committed steps: the step the job is at (a resumed job starts at its checkpoint's)");
  steps_target_ = &gauge("salamander_steps_target", "Steps the job is to run (0: idle until stopped)");
  loss_ = &gauge("salamander_loss", "Loss of the latest committed step (cross-entropy per token + the balancing loss)");
  val_loss_ = &gauge("salamander_validation_loss",
                     "Validation loss (cross-entropy per token of the held-out set) of the latest evaluated weights "
                     "(train.eval_every; 0 until the first)");
  val_step_ = &gauge("salamander_validation_step", "The step whose weights the latest validation loss is of");
  grad_norm_ = &gauge("salamander_grad_norm", "Global gradient norm of the latest committed step, before clipping");
  lr_ = &gauge("salamander_learning_rate", "Learning rate of the latest committed step");
  imbalance_ = &gauge("salamander_expert_imbalance",
                      "Busiest worker's expert tokens over the mean in the latest committed step (1 is even)");
  tokens_per_s_ = &gauge("salamander_tokens_per_second", "Tokens per second over the last 20 committed steps");
  tokens_ = &counter("salamander_tokens_total", "Tokens in the committed steps");
  aborted_ = &counter("salamander_aborted_steps_total", "Steps aborted (a lost worker, a failed step) and begun again");
  corrupt_copies_ = &counter("salamander_corrupt_copies_total",
                             "Copies of a unit whose digests disagreed with the unit's majority (repaired; docs/health.md)");
}

void MetricsExport::add_membership() {
  nodes_live_ = &gauge("salamander_live_nodes", "Nodes alive (or suspected but not yet declared dead)");
  nodes_expected_ = &gauge("salamander_expected_nodes", "Nodes the job asks for (mesh.nodes)");
  workers_live_ = &gauge("salamander_live_workers", "Workers ready to train");
  slow_workers_ = &gauge("salamander_slow_workers",
                         "Workers named slow: computing slow_ratio times the others' time or more (job.health())");
  lightened_workers_ = &gauge("salamander_lightened_workers",
                              "Workers the health policy gave less than an even share of the work (job.health() share)");
  epoch_ = &gauge("salamander_epoch", "Membership epoch: bumped by every join, loss or departure");
  plan_ = &gauge("salamander_plan", "Number of the plan in force (0 before the first)");
  auto& phases = family<prometheus::Gauge>("salamander_phase", "The job driver's phase: 1 for the one it is in, 0 for the others");
  for (size_t p = 0; p < kPhases; ++p) phase_[p] = &phases.Add({{"phase", job::phase_name(job::Phase(p))}});
}

void MetricsExport::add_recovery() {
  recoveries_ = &counter("salamander_recoveries_total", "Recoveries: training resumed after a lost worker");
  recovery_s_ = &family<prometheus::Histogram>("salamander_recovery_seconds",
                                               "Seconds from a loss being seen to the next committed step")
                     .Add({}, kRecoveryBuckets);
  capacity_wait_ = &counter("salamander_capacity_wait_seconds_total",
                            "Seconds recoveries waited for workers enough to plan (apart from the engine's recovery time)");
  restores_ = &counter("salamander_restores_total", "Restores from a snapshot, sparse in peers' memory or dense on disk (an expert lost every replica)");
  lost_ = &counter("salamander_lost_steps_total", "Committed steps run again after restoring a snapshot");
  snapshot_step_ = &gauge("salamander_snapshot_latest_step", "Step of the newest complete dense snapshot (0: none yet)");
  auto& snapshots = family<prometheus::Counter>("salamander_snapshots_total",
                                                "Dense snapshots by outcome: complete, failed (a rank could not write "
                                                "its share), dropped (a rank writing it left)");
  // by the event that tells each outcome
  for (auto [kind, outcome] : {std::pair{"snapshot_saved", "complete"}, std::pair{"snapshot_failed", "failed"},
                               std::pair{"snapshot_dropped", "dropped"}})
    snapshot_outcomes_[kind] = &snapshots.Add({{"outcome", outcome}});
}

void MetricsExport::add_policies() {
  plan_decision_s_ = &family<prometheus::Histogram>("salamander_plan_decision_seconds",
                                                    "Seconds the planner took to decide a plan (every policy slot together)")
                          .Add({}, kDecisionBuckets);
  auto& generations = family<prometheus::Gauge>("salamander_policy_generation",
                                                "Live generation of each policy slot (bumped by every load or reload; a "
                                                "rollback brings an older one back; 0: the C++ floor)");
  auto& decisions = family<prometheus::Histogram>("salamander_policy_decision_seconds",
                                                  "Seconds each policy slot took to decide (0 when the C++ floor decided)");
  for (policy::Kind k : policy::kKinds) {
    prometheus::Labels slot{{"slot", std::string(policy::kind_name(k))}};
    generation_[size_t(k)] = &generations.Add(slot);
    decision_s_[size_t(k)] = &decisions.Add(slot, kDecisionBuckets);
  }
}

void MetricsExport::update(const JobState& s) {
  step_->Set(double(s.steps_committed));
  steps_target_->Set(double(s.steps_target));
  if (s.last) {
    loss_->Set(s.last->loss);
    if (s.last_validated) val_loss_->Set(s.last_validated->val_loss), val_step_->Set(double(s.last_validated->step));
    grad_norm_->Set(s.last->grad_norm);
    lr_->Set(s.last->lr);
    imbalance_->Set(s.last->imbalance);
  }
  tokens_per_s_->Set(s.tokens_per_s);
  advance(*tokens_, double(s.tokens));
  nodes_live_->Set(double(s.nodes_live));
  nodes_expected_->Set(double(s.nodes_expected));
  workers_live_->Set(double(s.workers_live));
  slow_workers_->Set(double(s.slow_workers));
  lightened_workers_->Set(double(s.lightened_workers));
  epoch_->Set(double(s.epoch));
  plan_->Set(double(s.plan));
  advance(*aborted_, double(s.steps_aborted));
  advance(*corrupt_copies_, double(s.corrupt_copies));
  advance(*lost_, double(s.steps_lost));
  advance(*restores_, double(s.restores));
  for (size_t p = 0; p < kPhases; ++p) phase_[p]->Set(p == size_t(s.phase) ? 1 : 0);
  for (size_t k = 0; k < generation_.size(); ++k) generation_[k]->Set(double(s.policy_generations[k]));
}

void MetricsExport::recovery(double seconds, double capacity_wait_s) {
  recoveries_->Increment();
  recovery_s_->Observe(seconds);
  if (capacity_wait_s > 0) capacity_wait_->Increment(capacity_wait_s);
}

void MetricsExport::snapshot_complete(uint64_t step) { snapshot_step_->Set(double(step)); }

void MetricsExport::event(const std::string& kind, uint64_t count) {
  auto it = event_counters_.find(kind);
  if (it == event_counters_.end()) it = event_counters_.emplace(kind, &events_->Add({{"kind", kind}})).first;
  it->second->Increment(double(count));
  if (auto o = snapshot_outcomes_.find(kind); o != snapshot_outcomes_.end()) o->second->Increment(double(count));
}

void MetricsExport::policy_decision(policy::Kind slot, double ms) { decision_s_[size_t(slot)]->Observe(ms / 1e3); }

void MetricsExport::plan_decision(double ms) { plan_decision_s_->Observe(ms / 1e3); }

}  // namespace sal::metrics
