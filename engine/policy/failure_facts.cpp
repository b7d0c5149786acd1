// failure_facts.cpp — see failure_facts.h.
#include "policy/failure_facts.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

namespace sal::policy {
namespace {

// Mean hours between failures of one node when nothing is stated or measured: about what large
// training runs report — Meta's Llama 3 run saw 419 unexpected interruptions in 54 days on 16 384
// GPUs (2 048 nodes of 8), one per node every ≈ 6 300 hours — rounded down.
constexpr double kAssumedMtbfH = 5000;
// Until a plan switch of the job was measured (then a re-plan's, or a switch's, measured time is
// used): a second loss this soon after a first is simultaneous (no re-plan between them). A re-plan
// here takes 0.1–0.3 s after a loss on loopback (bench_recovery); Lazarus reports 20–40 s on a cluster.
constexpr double kWindowS = 10;
// Until a plan switch of the job was measured: what a restore costs beyond the steps it runs
// again, reading the state back and rebuilding the data plane on a cluster (0.3–0.8 s on
// loopback, measured).
constexpr double kRestoreOverheadS = 60;

std::string text(const char* format, double a, double b = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b);
  return buf;
}

// What a wipe-out's restore costs beyond the elastic recovery that any loss costs (the goodput
// model leaves that out of the comparison, as every placement pays it), and how it was reckoned.
// The elastic recovery is a re-plan (measured), else a plan switch and a step (the job's first
// plan's); a restore is what restores took (measured), else taken as a re-plan: a restore from
// peers is a re-plan whose workers read their state back. Nothing measured: kRestoreOverheadS, a
// cluster's restart.
std::pair<double, std::string> restore_extra(const RecoveryTimes& took, double step_s) {
  const bool replanned = took.replan_s > 0, switched = took.switch_s > 0;
  const double elastic_s = replanned ? took.replan_s : switched ? took.switch_s + step_s : 0;
  const std::string elastic = replanned ? text("re-plans %.3g s", elastic_s)
                                        : text("a plan switch and a step %.3g s", elastic_s);
  if (took.restore_s > 0 && elastic_s > 0)
    return {std::max(0.0, took.restore_s - elastic_s),
            text("beyond an elastic recovery: restores %.3g s, ", took.restore_s) + elastic + ", measured"};
  if (took.restore_s > 0) return {took.restore_s, "measured; no elastic recovery measured yet"};
  if (elastic_s > 0)
    return {0.0, "beyond an elastic recovery, none: no restore yet, taken as one (" + elastic + ", measured)"};
  return {kRestoreOverheadS, "assumed"};
}

}  // namespace

void FailureRate::observe(uint32_t workers, double at_s) {
  if (seen_) {
    node_s_ += double(workers_) * std::max(0.0, at_s - at_s_);
    if (workers < workers_) losses_ += workers_ - workers;
  }
  seen_ = true;
  workers_ = workers;
  at_s_ = at_s;
}

FailureFacts failure_facts(const FailureSettings& settings, const FailureRate& measured, double iteration_s,
                           double rerun_steps, const std::string& rerun_source, const RecoveryTimes& took) {
  FailureFacts f;
  if (settings.node_mtbf_h > 0) {
    f.rate = 1 / settings.node_mtbf_h;
    f.source = "stated (" + settings.stated_by + text("): one failure per node every %g h", settings.node_mtbf_h);
  } else if (measured.losses() > 0 && measured.node_hours() > 0) {
    f.rate = double(measured.losses()) / measured.node_hours();
    f.source = text("measured: %g node losses in %.3g node-hours", double(measured.losses()), measured.node_hours());
  } else {
    f.rate = 1 / kAssumedMtbfH;
    f.source = text("assumed: one failure per node every %g h", kAssumedMtbfH);
    if (measured.node_hours() > 0) f.source += text(" (no loss seen in %.3g node-hours)", measured.node_hours());
  }
  f.correlated = std::clamp(settings.correlated, 0.0, 1.0);
  f.window_s = took.replan_s > 0 ? took.replan_s : took.switch_s > 0 ? took.switch_s : kWindowS;
  const double step_s = iteration_s > 0 ? iteration_s : kAssumedIterationS;
  const auto [extra_s, how] = restore_extra(took, step_s);
  f.restore_s = extra_s + rerun_steps * step_s;
  f.restore_source = text("%.3g s to restore (", extra_s) + how + text(") + steps run again: %g", rerun_steps) +
                     text(" of %.3g s", step_s) + " (" + rerun_source + ")";
  return f;
}

FailureFacts assumed_failures() { return failure_facts({}, FailureRate{}, 0, 1, "assumed"); }

MoveFacts move_facts(double replica_s, const FailureFacts& f, uint32_t workers, int64_t rebalance_every,
                     double iteration_s) {
  MoveFacts m;
  if (!(replica_s > 0) || workers == 0) return m;
  m.replica_s = replica_s;
  const double to_loss_s = f.rate > 0 ? 3600 / (f.rate * workers) : 0;
  const double to_rebalance_s = rebalance_every > 0 && iteration_s > 0 ? double(rebalance_every) * iteration_s : 0;
  const bool rebalance_first = to_rebalance_s > 0 && (to_loss_s <= 0 || to_rebalance_s < to_loss_s);
  m.horizon_s = rebalance_first ? to_rebalance_s : to_loss_s;
  m.source = "the fetch measured; the horizon to the next " +
             (rebalance_first ? text("rebalance (%g steps of %.3g s)", double(rebalance_every), iteration_s)
                              : text("loss (%g workers at ", workers) + f.source + ")");
  if (!(m.horizon_s > 0)) m = {};
  return m;
}

}  // namespace sal::policy
