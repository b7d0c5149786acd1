// recovery_modes.h — which workers a new plan uses and whether it must restore a checkpoint, for
// each way of surviving failures (job key train.recovery):
//
//   elastic (Salamander): every ready worker; a restore only when some state lost every holder.
//   fixed-ep-ft (the DeepSpeed-FT baseline): whole expert-parallel groups only (plan/fixed_ep.h);
//     no restore while one whole group of the plan in force survives, a restore otherwise.
//   checkpoint-restart (the DeepSpeed-MoE baseline): whole groups; any change of the workers in
//     use — a loss, or a join that adds a group — restarts from the last checkpoint, as a
//     torchelastic re-rendezvous does.
//
// Before the first committed step nothing is ever restored (the state is the seed's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mesh/plan_switch.h"

namespace sal::mesh {

struct WorkerChoice {
  std::vector<Participant> use;  // the plan's workers; empty: too few for one EP group
  bool restore = false;
  std::string why;               // why a restore, or why no plan
};

// `ep` is the EP group size (ignored by elastic); `ready` sorted; `step` the next step.
WorkerChoice choose_workers(const std::string& mode, uint32_t ep, const std::vector<Participant>& ready,
                            const std::optional<AppliedPlan>& applied, uint64_t step);

}  // namespace sal::mesh
