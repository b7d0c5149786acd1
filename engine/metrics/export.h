// export.h — the job's metrics as a Prometheus registry (prometheus-cpp), served by the
// controller's metrics endpoint (endpoint.h). Nothing is computed here: the controller hands over
// what it already keeps (attachment.h) — the committed steps and their records (mesh/step_log.h,
// which feeds job.metrics() and metrics.csv), the run record's recoveries, restores and lost steps
// (mesh/run_record.h, summary.json), membership, the plan in force and the driver's phase (the
// progress line), the policy slots' generations and decisions, the snapshots the driver completes,
// and every event as events.csv gets it — as those happen, on the controller's loop.
// Metrics are named salamander_*, each with a HELP text and the job's name as the label job_name
// (`job` is the label Prometheus itself gives a scrape target). prometheus-cpp's metrics are
// thread-safe: the endpoint's threads collect them while the loop sets them, and the loop never
// waits on a scrape. docs/operations.md lists every metric.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "job/driver.h"
#include "job/measurements.h"
#include "policy/decision.h"

namespace sal::metrics {

// What the controller knows now, read where job.metrics(), the progress line and the summary read
// it (attachment.cpp: job_state()).
struct JobState {
  uint64_t steps_committed = 0;
  int64_t steps_target = 0;        // 0: idle, no steps
  uint64_t steps_aborted = 0;
  uint64_t steps_lost = 0;         // committed steps run again after restores
  uint64_t restores = 0;
  uint64_t tokens = 0;             // in every committed step
  double tokens_per_s = 0;         // over the last steps, as the progress line shows it
  std::optional<job::StepRecord> last;  // the latest committed step's record
  std::optional<job::StepRecord> last_validated;  // the latest with a validation loss (train.eval_every)
  uint64_t nodes_live = 0, nodes_expected = 0, workers_live = 0;
  uint64_t slow_workers = 0;       // named slow by the driver's speed watch (job/health.h)
  uint64_t lightened_workers = 0;  // given less than an even share of the work (job/work_shares.h)
  uint64_t corrupt_copies = 0;     // copies whose digests disagreed with their unit's majority (job/digests.h)
  uint64_t epoch = 0, plan = 0;
  job::Phase phase = job::Phase::gathering;
  std::array<uint64_t, std::size(policy::kKinds)> policy_generations{};  // the live generation per slot (0: none)
};

class MetricsExport {
 public:
  explicit MetricsExport(const std::string& job_name);
  MetricsExport(const MetricsExport&) = delete;
  MetricsExport& operator=(const MetricsExport&) = delete;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Gauges set to the state, counters advanced to its totals.
  void update(const JobState& s);
  // A recovery ended, taking `seconds` of the engine's time from the loss to the next committed
  // step, and `capacity_wait_s` more waiting for workers enough to plan.
  void recovery(double seconds, double capacity_wait_s);
  // A dense snapshot of `step` is complete.
  void snapshot_complete(uint64_t step);
  // An event was logged (events.csv): counted by kind; snapshot_saved, _failed and _dropped also
  // count as snapshot outcomes.
  void event(const std::string& kind, uint64_t count = 1);
  // A policy slot decided, in `ms` (0 for the C++ floor); the planner decided a whole plan in `ms`.
  void policy_decision(policy::Kind slot, double ms);
  void plan_decision(double ms);

 private:
  template <class T>
  prometheus::Family<T>& family(const std::string& name, const std::string& help);
  prometheus::Gauge& gauge(const std::string& name, const std::string& help);
  prometheus::Counter& counter(const std::string& name, const std::string& help);
  void add_training();    // steps, loss, tokens, aborted steps
  void add_membership();  // nodes, workers, epoch, plan, phase
  void add_recovery();    // recoveries, restores, lost steps, snapshots
  void add_policies();    // generations and decision times

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Labels job_label_;
  prometheus::Gauge *step_, *steps_target_, *loss_, *grad_norm_, *lr_, *imbalance_, *tokens_per_s_;
  prometheus::Gauge *val_loss_, *val_step_;
  prometheus::Gauge *nodes_live_, *nodes_expected_, *workers_live_, *slow_workers_, *lightened_workers_, *epoch_, *plan_, *snapshot_step_;
  prometheus::Counter *tokens_, *aborted_, *lost_, *restores_, *recoveries_, *capacity_wait_, *corrupt_copies_;
  prometheus::Histogram* recovery_s_;
  prometheus::Histogram* plan_decision_s_;
  static constexpr size_t kPhases = size_t(job::Phase::failed) + 1;
  std::array<prometheus::Gauge*, kPhases> phase_{};  // one per job::Phase: 1 for the one the driver is in
  std::array<prometheus::Gauge*, std::size(policy::kKinds)> generation_{};
  std::array<prometheus::Histogram*, std::size(policy::kKinds)> decision_s_{};
  prometheus::Family<prometheus::Counter>* events_;
  std::map<std::string, prometheus::Counter*> snapshot_outcomes_;  // by the event kind that tells each
  std::map<std::string, prometheus::Counter*> event_counters_;  // by kind, added as kinds appear
};

}  // namespace sal::metrics
