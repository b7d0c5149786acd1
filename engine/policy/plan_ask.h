// plan_ask.h — the planner's question and answer as plain values (planner.h): what a plan is
// decided for (PlanAsk, with the measured facts the checkpoint policy decides from) and the plan
// decided with who decided it (PlanRecord). The job driver asks and reads them without the
// policy machinery.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "plan/plan.h"
#include "policy/decision.h"

namespace sal::policy {

// What the checkpoint policy decides from, measured by the job driver. Zero means "not measured
// yet" (the planner then uses its assumptions).
struct CheckpointFacts {
  double iteration_s = 0;    // median step time of the recent committed steps
  double bandwidth_Bps = 0;  // bytes a snapshot copied over the pause training saw, median
  double path_Bps = 0;       // bytes a sparse slot's whole path moved a CPU-second of its writer's thread, median
  double replan_s = 0;       // the engine's time of the recent elastic recoveries (a loss to the next commit), median
  double restore_s = 0;      // the engine's time of the recent restores (a loss to the first step after it), median
  double restore_rerun = -1; // committed steps the recent restores ran again, median; < 0: no restore yet
  double switch_s = 0;       // the engine's time of the recent plan switches, the job's first plan's included, median
  double replica_s = 0;      // one expert replica's fetch in a plan switch (a receiving worker's migration over
                             // the replicas it received), median of the switches that moved experts
  uint64_t iteration = 0;    // the next step
  std::vector<std::vector<double>> popularity;  // [layer][expert]: share of routed tokens (sums to 1 per layer)
};

// A plan to decide: for `workers` positions, balanced on `loads` when given; `fixed_groups`: the
// baselines' fixed expert-parallel plan of that many groups instead of the policies'.
struct PlanAsk {
  uint32_t workers = 0;
  Epoch epoch = 0;
  std::optional<uint32_t> fixed_groups;
  std::optional<std::vector<std::vector<double>>> loads;  // measured loads to balance, [layer][expert]
  StepLoads step_loads;  // with them: the window's recent steps one by one (PlacementInput::steps)
  CheckpointFacts facts;
  // The failure domain (host) of each worker, 0-based labels in order of first appearance
  // (job::host_labels): the plan's positions are dealt onto them (plan/domains.h). Empty: one
  // worker per host.
  std::vector<uint32_t> domains;
  // The rack of each of those domains (racks[d], 0-based labels; job::rack_labels) when the job
  // names racks (mesh.racks). Empty: none.
  std::vector<uint32_t> racks;
  // A resumed job whose ranks all came back: decide nothing, put this plan in force again under the
  // next number (its allocation, placement, schedule and stacks unchanged).
  std::optional<plan::Plan> keep;
  // What each of the `workers` holds under the plan in force, [layer][worker][slot] (a worker that
  // joined since: no slots), for a one-group plan: the placement's ctx.current. Empty: none known
  // (the first plan, a grouped one).
  std::vector<std::vector<std::vector<uint32_t>>> held;
};

// A decided plan and who decided it.
struct PlanRecord {
  plan::Plan plan;  // version = its number; schedule and stacks filled in
  Epoch epoch = 0;  // the membership epoch it was decided for
  std::string allocation_by, placement_by, checkpoint_by, redundancy_by;  // which generation decided
  std::string note;        // e.g. the floor being lowered
  std::string floor_note;  // the allocation's note alone (why the floor is what it is), for the warning
  double ms = 0;           // time to decide all of it
};

}  // namespace sal::policy
