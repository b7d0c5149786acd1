// controller_metrics.cpp — the controller's Prometheus endpoint (see controller.h): with
// metrics.bind set, the registry (metrics_export.h) is fed from where the controller's own records
// are — every event as the event log gets it, every policy decision as the slot makes it, each
// recovery, snapshot and plan decision as the driver's actions arrive (controller_driver.cpp), and
// the state (steps, loss, nodes, plan, ...) after every batch of the driver's actions and every
// mesh message — and served over HTTP from civetweb's threads (metrics_endpoint.h).
#include <spdlog/spdlog.h>

#include "mesh/controller.h"
#include "mesh/metrics_endpoint.h"
#include "mesh/metrics_export.h"
#include "mesh/planner.h"

namespace sal::mesh {

Status Controller::start_metrics() {
  const std::string& bind = opts_.job.metrics.bind;
  if (bind.empty()) return {};
  auto exp = std::make_unique<MetricsExport>(opts_.job.name);
  job::MetricsConfig config = opts_.job.metrics;  // its credential files are relative to the job file
  for (std::string* file : {&config.token, &config.users, &config.tls})
    if (!file->empty()) *file = job::resolve_path(opts_.job, *file);
  auto ep = MetricsEndpoint::start(config, exp->registry());
  if (!ep) return ep.error().with_context("metrics.bind");
  export_ = std::move(exp);
  metrics_endpoint_ = std::move(*ep);
  events_.on_add = [this](const std::string& kind) { export_->event(kind); };
  planner_->policies().on_decision = [this](policy::Kind k, const policy::Decision& d) {
    export_->policy_decision(k, d.ms);
  };
  return {};
}

std::string Controller::metrics_url() const { return metrics_endpoint_ ? metrics_endpoint_->url() : ""; }

JobState Controller::metrics_state() const {
  JobState s;
  s.steps_committed = steps().committed();
  s.steps_target = opts_.max_steps;
  s.steps_aborted = steps().aborted();
  s.steps_lost = record_.lost_steps();
  s.restores = record_.restores();
  s.tokens = metrics_.tokens();
  s.tokens_per_s = metrics_.recent_tokens_per_s(MetricsLog::kRecentSteps);
  if (const auto* last = metrics_.last()) s.last = *last;
  s.nodes_live = membership_.live_nodes();
  s.nodes_expected = uint64_t(opts_.job.mesh.nodes);
  s.workers_live = membership_.ready_workers();
  s.epoch = membership_.epoch();
  s.plan = driver_->applied() ? driver_->applied()->number() : 0;
  s.phase = driver_->phase();
  for (policy::Kind k : policy::kKinds) {
    const auto* live = planner_->policies().slot(k).live();
    s.policy_generations[size_t(k)] = live ? live->number : 0;
  }
  return s;
}

void Controller::export_state() {
  if (export_) export_->update(metrics_state());
}

}  // namespace sal::mesh
