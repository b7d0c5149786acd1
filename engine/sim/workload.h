// workload.h — the simulated MoE workload: each layer's expert loads as training goes on, and the
// step-time model of scenario.h evaluated on a plan (the busiest node's routed tokens set the expert
// compute, as the flexible dispatcher shares every expert's tokens evenly over its replicas) or on
// a stacked data-parallel configuration (rounds of shard compute).
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "plan/plan.h"
#include "sim/scenario.h"

namespace sal::sim {

class Workload {
 public:
  // Builds the load schedule (reads a trace file when the loads come from one).
  static Result<Workload> make(const Scenario& s);

  // Loads change in phases (drift, a trace directory); plans and step times can be cached per phase.
  size_t phase_of(int64_t step) const;
  // Per layer, each expert's share of the routed tokens at `step` (each row sums to 1).
  const std::vector<std::vector<double>>& shares(int64_t step) const { return phases_[phase_of(step)]; }
  // The same as routed-token counts (tokens_per_step · top_k · share), what allocation policies see.
  std::vector<std::vector<double>> token_loads(int64_t step) const;

  // Step time of a plan whose positions are nodes (Salamander, checkpoint-restart, fixed-ep-ft).
  double plan_step_s(const plan::Plan& p, int64_t step) const;
  // Step time of stacked data-parallel groups computing `depth` shard rounds each.
  double stacked_step_s(double depth, uint32_t live_groups) const;

  // Bytes of a dense checkpoint of the whole model.
  double checkpoint_bytes() const;

  const Scenario& scenario() const { return *s_; }

 private:
  const Scenario* s_ = nullptr;
  std::vector<std::vector<std::vector<double>>> phases_;  // [phase][layer][expert]
  int64_t steps_per_phase_ = 0;                           // 0: one phase for all steps
};

// A strategy's cached plan_step_s: recomputed when the load phase changes or after invalidate()
// (the strategy's plan was replaced).
class PlanStepTime {
 public:
  double get(const Workload& w, const plan::Plan& p, int64_t step) const {
    size_t phase = w.phase_of(step);
    if (phase != phase_ || s_ < 0) {
      s_ = w.plan_step_s(p, step);
      phase_ = phase;
    }
    return s_;
  }
  void invalidate() { s_ = -1; }

 private:
  mutable double s_ = -1;
  mutable size_t phase_ = 0;
};

}  // namespace sal::sim
