// attachment.cpp — see attachment.h.
#include "metrics/attachment.h"

#include <spdlog/spdlog.h>

#include "mesh/controller.h"
#include "metrics/endpoint.h"
#include "metrics/export.h"
#include "policy/planner.h"

namespace sal::metrics {
namespace {

// What job.metrics(), the progress line and the summary read, for the registry.
JobState job_state(mesh::Controller& c) {
  JobState s;
  const auto& log = c.step_log();
  s.steps_committed = c.steps().committed();
  s.steps_target = c.max_steps();
  s.steps_aborted = c.aborted_steps();  // a resumed job's totals go on from the run's
  s.steps_lost = c.record().lost_steps();
  s.restores = c.record().restores();
  s.tokens = log.tokens();
  s.tokens_per_s = log.recent_tokens_per_s(mesh::StepLog::kRecentSteps);
  if (const auto* last = log.last()) s.last = *last;
  s.last_validated = log.last_validated();
  s.nodes_live = c.membership().live_nodes();
  s.nodes_expected = uint64_t(c.job().mesh.nodes);
  s.workers_live = c.membership().ready_workers();
  s.slow_workers = c.driver().health().slow_count();
  s.lightened_workers = c.driver().shares().lightened();
  const auto& before = c.resumed_from();
  s.corrupt_copies = before ? before->corrupt_copies : 0;
  for (const auto& [who, n] : c.driver().corrupt_copies()) s.corrupt_copies += n;
  s.epoch = c.membership().epoch();
  s.plan = c.driver().applied() ? c.driver().applied()->number() : 0;
  s.phase = c.driver().phase();
  for (policy::Kind k : policy::kKinds) {
    const auto* live = c.planner().policies().slot(k).live();
    s.policy_generations[size_t(k)] = live ? live->number : 0;
  }
  return s;
}

class PrometheusAttachment : public mesh::Attachment {
 public:
  PrometheusAttachment(mesh::Controller& c, std::unique_ptr<MetricsExport> exp, std::unique_ptr<MetricsEndpoint> ep)
      : controller_(c), export_(std::move(exp)), endpoint_(std::move(ep)) {}

  mesh::AttachedEndpoint endpoint() const override { return {"metrics", endpoint_->url()}; }
  void state_changed() override { export_->update(job_state(controller_)); }
  void event(const std::string& kind) override { export_->event(kind); }
  void policy_decision(policy::Kind slot, double ms) override { export_->policy_decision(slot, ms); }
  void plan_decided(double ms) override { export_->plan_decision(ms); }
  void recovery(double seconds, double capacity_wait_s) override { export_->recovery(seconds, capacity_wait_s); }
  void snapshot_complete(uint64_t step) override { export_->snapshot_complete(step); }
  void resumed(const job::JournalState& before, const std::map<std::string, uint64_t>& events) override {
    for (const auto& r : before.recoveries) export_->recovery(r.seconds, r.capacity_wait_s);
    for (const auto& [kind, n] : events) export_->event(kind, n);
  }

 private:
  mesh::Controller& controller_;
  std::unique_ptr<MetricsExport> export_;
  std::unique_ptr<MetricsEndpoint> endpoint_;  // declared after the registry it serves: stops first
};

}  // namespace

mesh::Attach attach(const job::JobConfig& job) {
  job::MetricsConfig config = job.metrics;  // its credential files are relative to the job file
  for (std::string* file : {&config.token, &config.users, &config.tls})
    if (!file->empty()) *file = job::resolve_path(job, *file);
  return [config, name = job.name](const mesh::AttachContext& ctx) -> Result<std::unique_ptr<mesh::Attachment>> {
    auto exp = std::make_unique<MetricsExport>(name);
    auto ep = MetricsEndpoint::start(config, exp->registry());
    if (!ep) return ep.error().with_context("metrics.bind");
    return std::unique_ptr<mesh::Attachment>(
        std::make_unique<PrometheusAttachment>(ctx.controller, std::move(exp), std::move(*ep)));
  };
}

}  // namespace sal::metrics
