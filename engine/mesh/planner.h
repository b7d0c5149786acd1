// planner.h — the controller's planning: it owns the job's policy slots and turns the ready
// workers and the recent expert loads into a plan. When the training driver (training.h) asks — a
// membership change, a rebalance, a policy reload — it asks the allocation policy for replica
// counts, the placement policy for the slot table, and the checkpoint policy for the snapshot
// schedule, each validated in C++ (a refused proposal falls back as slot.h describes). The driver
// then maps the plan onto the workers (plan_switch.h) and puts it in force between steps.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job/config.h"
#include "plan/plan.h"
#include "policy/policy_set.h"

namespace sal::mesh {

struct PlanRecord {
  plan::Plan plan;
  plan::CheckpointSchedule schedule;
  uint64_t number = 0;          // plans made so far
  uint64_t epoch = 0;           // membership epoch it was made for
  std::string allocation_by, placement_by, checkpoint_by;  // which generation decided
  std::string note;             // e.g. the floor being lowered
  double ms = 0;                // time to decide all of it
};

class Planner {
 public:
  // `service` runs every few ms while a policy decides (the controller keeps serving its mesh).
  Planner(const job::JobConfig& job, std::function<void()> service);

  // Loads the job's policy into every slot; the error names the job key (policies.placement: ...).
  Status configure();
  // A new plan for `workers` plan positions (ready workers), recorded as current.
  Result<PlanRecord> replan(uint32_t workers, uint64_t epoch);
  // The baselines' plan (plan/fixed_ep.h): `groups` whole expert-parallel groups, recorded as current.
  Result<PlanRecord> fixed_ep(uint32_t groups, uint64_t epoch);

  policy::PolicySet& policies() { return policies_; }
  const std::optional<PlanRecord>& current() const { return current_; }

  // Per-layer expert loads the allocation sees (uniform until the driver passes measured ones).
  std::vector<std::vector<double>> loads;

 private:
  const job::JobConfig& job_;
  policy::PolicySet policies_;
  std::optional<PlanRecord> current_;
};

// The operators of a moe-gpt model (each expert of each layer, each gate, each layer's dense part,
// the embeddings) with their sizes, as the checkpoint policy sees them.
std::vector<policy::OperatorInfo> model_operators(const job::ModelConfig& m);

}  // namespace sal::mesh
