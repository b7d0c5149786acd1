// planner.h — planning: the policy slots of a job and the plans they decide. The controller asks
// it for a plan whenever the job driver does (job/driver_io.h: act::DecidePlan carries a PlanAsk),
// and the simulator asks plan_group() for the same allocation → placement sequence. A plan is the
// allocation policy's replica counts, the placement policy's slot table (per data-parallel group),
// the checkpoint-window policy's snapshot schedule (from the model's operators, the measured
// iteration time and snapshot bandwidth, and the experts' popularity) and the redundancy policy's
// shard stacks, each validated in C++ (a refused proposal falls back as slot.h describes). The plan
// it returns is numbered (plan::Plan::version) and is the value every worker follows; the driver
// maps it onto the workers (job/plan_switch.h) and puts it in force between steps.
//
// It knows nothing of job files: PlannerConfig is what it needs of one (job::planner_config()
// builds it).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model_shape.h"
#include "plan/plan.h"
#include "policy/failure_facts.h"
#include "policy/plan_ask.h"
#include "policy/policy_set.h"

namespace sal::policy {

// What the planner needs of a job.
struct PlannerConfig {
  ModelShape shape;
  uint32_t slots = 4;          // expert slots per worker
  uint32_t min_replicas = 2;   // the fault-tolerance floor f asked for
  uint32_t groups = 1;         // data-parallel groups (parallel.groups)
  uint32_t redundancy = 0;     // SPARe's r (0: the policy's choice)
  // Failures, for the placement: the rate stated (policies.node_mtbf_h, .correlated_failures; 0:
  // measure), and what a wipe-out costs (sparse windows in peers' memory, else dense snapshots).
  FailureSettings failures;
  uint32_t peer_copies = 2;
  // train.snapshot_cpu_share: the share of an iteration a sparse slot's whole path may take on the
  // workers' CPUs (0: only the writer's copy counts, as MoEtion sizes it on a GPU).
  double snapshot_cpu_share = 0;
  int64_t checkpoint_every = 50;
  bool expert_logs = false;          // train.expert_logs (sparse snapshots then count whatever the dense ones do)
  int64_t rebalance_every = 0;       // train.rebalance_every (how long a placement stands, for its moves' worth)
  std::string recovery = "elastic";  // named in the baselines' fixed plans
  bool dispatch_by_counts = true;    // train.dispatch (the placement judges the steps' split by it)
  // The policy of each kind: a shipped name or a file; relative .lua paths are under `dir`.
  std::string allocation, placement, checkpoint, redundancy_policy, health_policy = "ignore";
  std::string dir;
  int64_t budget_ms = 500;
  size_t memory_limit = 64u << 20;
};

// One group's allocation and placement: a whole model over `workers` positions.
struct GroupAsk {
  uint32_t workers = 0, slots = 0, experts = 0, min_replicas = 1;
  std::vector<std::vector<double>> loads;                    // [layer][expert]
  std::vector<std::vector<std::vector<uint32_t>>> current;   // the placement to start from; may be empty
  FailureFacts failures;                                     // what the placement weighs survival by
  std::vector<uint32_t> hosts;                               // workers per host (PlacementInput::hosts)
  std::vector<uint32_t> racks;                               // each host's rack (PlacementInput::racks)
  StepLoads steps;                                           // the window's steps (PlacementInput::steps)
  bool dispatch_by_counts = true;
  MoveFacts moves;                                           // what re-placing costs (PlacementInput::moves)
};
struct GroupPlan {
  uint32_t floor = 1;
  std::vector<plan::LayerPlan> layers;
  std::string allocation_by, placement_by, note;  // the note: the allocation's, then the placement's
  std::string allocation_note;                     // the allocation's alone
  std::string choice;  // the placement's account of its choice (JSON text; "" when it gave none)
};
// The allocation policy of `set`, then its placement policy, for one group.
Result<GroupPlan> plan_group(PolicySet& set, const GroupAsk& ask);

class Planner {
 public:
  // `service` runs every few ms while a policy decides (the controller keeps serving its mesh).
  Planner(PlannerConfig cfg, std::function<void()> service);

  // Loads the configured policy into every slot; the error names the job key (policies.placement: ...).
  // A resumed job's slots take the sources its journal recorded (`journaled`: slot name -> source).
  Status configure(const std::map<std::string, std::string>* journaled = nullptr);
  // A resumed job: plans are numbered on from the one in force.
  void resume(const plan::Plan& in_force);
  // A plan as the driver asks: elastic (the policies) or the baselines' fixed expert-parallel plan.
  // Recorded as current.
  Result<PlanRecord> decide(const PlanAsk& ask);

  // SPARe's reordering for a patch: the redundancy policy's stacks when only the `alive` groups
  // are left in the step, starting from `current` (the plan in force's).
  // `decided_by` says which generation decided them.
  Result<plan::ShardStacks> patch_stacks(const std::vector<bool>& alive, const plan::ShardStacks& current,
                                         std::string& decided_by);

  // What to do about the workers' speeds (the health policy): each one's share of the work and
  // which leave. `decided_by` says which generation decided.
  HealthProposal health(const HealthInput& in, std::string& decided_by);

  PolicySet& policies() { return policies_; }
  const std::optional<PlanRecord>& current() const { return current_; }
  // What the checkpoint policy was told at the last decision (job.plan() shows it).
  const CheckpointInput& checkpoint_input() const { return checkpoint_input_; }
  // The placement policy's account of its last choice (JSON text; "" when it gave none).
  const std::string& placement_choice() const { return placement_choice_; }

 private:
  Result<PlanRecord> again(const plan::Plan& keep, Epoch epoch);
  using Placements = std::vector<std::vector<std::vector<uint32_t>>>;  // per layer, per position, the slots
  Result<PlanRecord> elastic(uint32_t workers, const Placements& held);
  Result<PlanRecord> grouped(uint32_t workers);
  Result<GroupPlan> one_group(uint32_t workers, Placements current);
  Placements current_placement(uint32_t g, uint32_t positions) const;
  Result<PlanRecord> fixed_ep(uint32_t groups);
  void deal_domains(const std::vector<uint32_t>& domains, PlanRecord& r) const;
  void decide_schedule(const CheckpointFacts& facts, PlanRecord& r);
  void decide_stacks(PlanRecord& r);
  static void reset_stacks(plan::ShardStacks& s);
  static void give_left_over(plan::Plan& p, uint32_t left);
  RedundancyInput redundancy_input(std::vector<bool> alive, const plan::ShardStacks& current) const;
  // What the placement weighs survival by: the stated rate, else the losses seen between plans; a
  // wipe-out costs the steps a restore runs again (two windows of sparse snapshots in peers, else
  // half the dense snapshot period).
  FailureFacts failure_facts(const CheckpointFacts& facts) const;

  PlannerConfig cfg_;
  PolicySet policies_;
  std::optional<PlanRecord> current_;
  CheckpointInput checkpoint_input_;
  // Per-layer expert loads the allocation sees: uniform until the driver passes measured ones.
  std::vector<std::vector<double>> loads_;
  StepLoads step_loads_;  // the window's recent steps, with the measured loads (empty until then)
  FailureRate failure_rate_;  // node losses seen between plans
  FailureFacts failures_;     // told to the placement at the decision under way
  MoveFacts moves_;           // likewise: what re-placing costs
  std::vector<uint32_t> hosts_;  // workers per host at the decision under way (empty: one each)
  std::vector<uint32_t> racks_;  // each of those hosts' rack (empty: no racks named)
  std::string placement_choice_;
};

}  // namespace sal::policy
