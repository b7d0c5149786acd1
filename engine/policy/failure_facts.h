// failure_facts.h — what the placement policy is told about node failures (decision.h:
// FailureFacts, ctx.failures in Lua), so that it can weigh balance against survival: the rate of
// node failures — as the job file states it, else as measured from the plans the job asked for, else
// an assumed rate that says so — and what losing every replica of an expert costs beyond the elastic
// recovery any loss costs (the restore's extra time and the steps run again).
//
// Measuring: a plan decided for fewer workers than the plan before counts the difference as node
// losses (a drain counts too: it also takes a node's replicas away), over the node-hours between
// the plans. Until a loss is seen the rate is assumed: a few hours without one say little.
#pragma once

#include <cstdint>
#include <string>

#include "policy/decision.h"

namespace sal::policy {

// The step time the policies plan for until the driver has measured one (the failure facts' cost of
// a wipe-out, the checkpoint policy's window).
constexpr double kAssumedIterationS = 1;

// What the job file states (policies.node_mtbf_h, policies.correlated_failures).
struct FailureSettings {
  double node_mtbf_h = 0;  // mean hours between failures of one node; 0: measure
  double correlated = 0;   // probability that a loss takes another node down with it
  std::string stated_by = "policies.node_mtbf_h";  // where node_mtbf_h was stated
};

// Node losses over node-hours, from the worker counts of successive plans.
class FailureRate {
 public:
  // A plan for `workers` decided at `at_s` (seconds on any steady clock).
  void observe(uint32_t workers, double at_s);
  uint64_t losses() const { return losses_; }
  double node_hours() const { return node_s_ / 3600; }

 private:
  uint32_t workers_ = 0;
  double at_s_ = 0, node_s_ = 0;
  uint64_t losses_ = 0;
  bool seen_ = false;
};

// What this job's recoveries took, the engine's time (0: none seen yet): an elastic re-plan's (a
// loss to the next committed step), and a restore's (a loss to the first step after it); and what
// its plan switches took (the first plan's from the job's start), known before any loss.
struct RecoveryTimes {
  double replan_s = 0;
  double restore_s = 0;
  double switch_s = 0;
};

// The facts for a plan: the rate as stated, else measured once a loss was seen, else assumed;
// a wipe-out's cost from the step time (`iteration_s`, 0: not measured yet), the steps a restore
// runs again (`rerun_steps`, said how in `rerun_source`) and what a restore takes beyond the elastic
// recovery that the same loss would otherwise cost (every placement pays that one): measured
// restores less measured re-plans (a re-plan, else before the first loss a plan switch and a step);
// with no restore measured yet, none beyond (a restore re-plans too, then reads the state back from
// peers' memory or disk); with nothing measured, an assumed cluster figure. Two losses count as
// simultaneous when the second comes before the first's re-plan is done: within the measured
// re-plan time, else a switch's, else an assumed cluster figure.
FailureFacts failure_facts(const FailureSettings& settings, const FailureRate& measured, double iteration_s,
                           double rerun_steps, const std::string& rerun_source, const RecoveryTimes& took = {});

// The facts when nothing is known (offline tools): the assumed rate, a restore of one step.
FailureFacts assumed_failures();

// What re-placing costs (MoveFacts): a replica's measured fetch (`replica_s`, 0: none measured, and
// then no facts) and how long a placement stands — until the next loss of one of `workers` at the
// failure rate `f` gives, or the next rebalance (`rebalance_every` steps of `iteration_s`; 0: none),
// whichever comes first.
MoveFacts move_facts(double replica_s, const FailureFacts& f, uint32_t workers, int64_t rebalance_every,
                     double iteration_s);

}  // namespace sal::policy
