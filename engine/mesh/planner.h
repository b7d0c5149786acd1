// planner.h — the controller's planning: it owns the job's policy slots and answers the job
// driver's requests for a plan (job/driver_io.h: act::DecidePlan). It asks the allocation policy
// for replica counts, the placement policy for the slot table, the checkpoint-window policy for
// the snapshot schedule (from the model's operators, the measured iteration time and snapshot
// bandwidth, and the experts' popularity), and the redundancy policy for the shard stacks, each
// validated in C++ (a refused proposal falls back as slot.h describes). The plan it returns is
// numbered (plan::Plan::version) and is the value every worker follows; the driver maps it onto
// the workers (job/plan_switch.h) and puts it in force between steps.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "job/config.h"
#include "job/driver_io.h"
#include "job/journal.h"
#include "plan/plan.h"
#include "policy/failure_facts.h"
#include "policy/policy_set.h"

namespace sal::mesh {

class Planner {
 public:
  // `service` runs every few ms while a policy decides (the controller keeps serving its mesh).
  Planner(const job::JobConfig& job, std::function<void()> service);

  // Loads the job's policy into every slot; the error names the job key (policies.placement: ...).
  // A resumed job's slots take the sources its journal recorded (`journaled`, by slot name).
  Status configure(const std::map<std::string, job::rec::Policy>* journaled = nullptr);
  // A resumed job: plans are numbered on from the one in force.
  void resume(const plan::Plan& in_force);
  // A plan as the driver asks: elastic (the policies) or the baselines' fixed expert-parallel plan
  // of `ask.fixed_groups` groups. Recorded as current.
  Result<job::PlanRecord> decide(const job::act::DecidePlan& ask);

  // SPARe's reordering for a patch: the redundancy policy's stacks when only the `alive` groups
  // are left in the step, starting from `current` (the plan in force's).
  // `decided_by` says which generation decided them.
  Result<plan::ShardStacks> patch_stacks(const std::vector<bool>& alive, const plan::ShardStacks& current,
                                         std::string& decided_by);

  policy::PolicySet& policies() { return policies_; }
  const std::optional<job::PlanRecord>& current() const { return current_; }
  // What the checkpoint policy was told at the last decision (job.plan() shows it).
  const policy::CheckpointInput& checkpoint_input() const { return checkpoint_input_; }
  // The placement policy's account of its last choice (JSON text; "" when it gave none).
  const std::string& placement_choice() const { return placement_choice_; }

 private:
  Result<job::PlanRecord> again(const plan::Plan& keep, Epoch epoch);
  // One group's allocation and placement (a whole model over its positions).
  struct GroupPlan {
    uint32_t slots = 0, experts = 0, floor = 1;
    std::vector<plan::LayerPlan> layers;
    std::string allocation_by, placement_by, note;
  };
  using Placements = std::vector<std::vector<std::vector<uint32_t>>>;  // per layer, per position, the slots
  Result<job::PlanRecord> elastic(uint32_t workers);
  Result<job::PlanRecord> grouped(uint32_t workers);
  Result<GroupPlan> one_group(uint32_t workers, Placements current);
  Placements current_placement(uint32_t g, uint32_t positions) const;
  Result<job::PlanRecord> fixed_ep(uint32_t groups);
  void decide_schedule(const job::CheckpointFacts& facts, job::PlanRecord& r);
  void decide_stacks(job::PlanRecord& r);
  static void reset_stacks(plan::ShardStacks& s);
  policy::RedundancyInput redundancy_input(std::vector<bool> alive, const plan::ShardStacks& current) const;

  const job::JobConfig& job_;
  ModelShape shape_;
  policy::PolicySet policies_;
  std::optional<job::PlanRecord> current_;
  policy::CheckpointInput checkpoint_input_;
  // Per-layer expert loads the allocation sees: uniform until the driver passes measured ones.
  std::vector<std::vector<double>> loads_;
  // Failures, for the placement (issue 35): node losses seen between plans, what they cost.
  policy::FailureRate failure_rate_;
  policy::FailureFacts failure_facts(const job::CheckpointFacts& facts) const;
  policy::FailureFacts failures_;
  std::string placement_choice_;
};

}  // namespace sal::mesh
