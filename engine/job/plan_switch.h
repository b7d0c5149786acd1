// plan_switch.h — from a decided plan to what each worker is told: which participant becomes which
// rank, and which units of model state move before the plan's first step.
//
// Ranks: the greedy remap (plan/remap.h) gives each plan position to the participant that already
// holds most of its replicas, so few experts move — among the workers of the position's host when
// the plan has failure domains (host_labels()) — or keeps the workers in their order (the plan in
// force's ranks first) where that moves no more state, so their data planes are kept rather than
// connected again (PlanUpdate.keep_planes_of). Experts a rank must newly hold are fetched from
// surviving holders, spread over all of them. A participant that was not a rank of the plan in
// force (it joined, or it came back) holds nothing valid: it also receives every non-expert unit
// (embeddings, each layer's dense part and gate), spread over the surviving ranks. Before the
// first step is committed every unit is still its seeded initial value, so nothing moves: each
// rank creates what it holds from the seed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/result.h"
#include "plan/plan.h"
#include "plan/remap.h"
#include "wire/messages.h"

namespace sal::job {

// The plan the workers follow now.
struct AppliedPlan {
  std::vector<Participant> ranks;  // rank order (== plan positions)
  plan::Plan plan;
  uint64_t from_step = 0;          // the first step run under it
  uint64_t number() const { return plan.version; }
};

struct PlanSwitch {
  std::vector<Participant> ranks;           // rank order of the new plan
  std::vector<wire::UnitTransfer> transfers;
  uint64_t experts_kept = 0;                // replicas already in place
  uint64_t experts_moved = 0;               // replicas transferred
  uint64_t dense_moved = 0;                 // non-expert units transferred (to fresh ranks)
};

// What rank `rank` of the new plan receives in the switch: expert replicas, and whether any other
// unit too (a new worker's dense state).
struct Received {
  uint64_t experts = 0;
  bool dense = false;
};
Received received_by(const PlanSwitch& sw, uint32_t rank);

// The failure domain of each worker: its host (its agent), as plan.domains labels them — 0-based, in
// the order the hosts first come in `workers` (plan/domains.h).
std::vector<uint32_t> host_labels(const std::vector<Participant>& workers);

// What each of `workers` holds under the plan in force, [layer][worker][slot] (none for a worker
// not in it): the placement policy's ctx.current. Empty for a grouped plan (each group is placed on
// its own) or none in force.
std::vector<std::vector<std::vector<uint32_t>>> held_by(const std::optional<AppliedPlan>& current,
                                                        const std::vector<Participant>& workers);

// The rack of each of those hosts (plan.racks: 0-based, in the order the racks first come) from the
// racks the job names its nodes in (`rack_of`: node -> rack name); a node in no rack is a rack of
// its own. Empty when no worker's node is in a named rack.
std::vector<uint32_t> rack_labels(const std::vector<Participant>& workers, const std::map<NodeId, std::string>& rack_of);

// `participants` are the workers of the new plan (next.nodes of them), `step` its first step.
// Fails when some state has no surviving holder (only a checkpoint could restore it), naming it —
// but the experts `rebuilt` names, which their new holders rebuild themselves (no transfer).
Result<PlanSwitch> switch_plan(const std::optional<AppliedPlan>& current, const std::vector<Participant>& participants,
                               const plan::Plan& next, uint64_t step, const std::set<plan::LayerExpert>& rebuilt = {});

// `next` with its data-parallel groups in the order that keeps the most of the plan in force's group
// data planes (plan/group_order.h), the participants taking positions in their order (the plan in
// force's ranks first), as switch_plan gives them where that moves no more state. `next` itself
// when it has one group, there is no grouped plan in force, or no order keeps more.
struct Arranged {
  plan::Plan plan;
  std::vector<uint32_t> order;  // plan's k-th group is next's order[k]; empty: next as it was
};
Arranged arrange_groups(const std::optional<AppliedPlan>& current, const std::vector<Participant>& participants,
                          const plan::Plan& next);

// The experts no participant holds any more, as (layer, expert).
std::set<plan::LayerExpert> lost_experts(const std::optional<AppliedPlan>& current,
                                         const std::vector<Participant>& participants);

// The state that no participant holds any more: "layer 0 expert 3" for each expert that lost every
// replica, "the non-expert units" when no rank of the current plan is left. Empty when an elastic
// switch can restore everything (or nothing was committed yet).
std::vector<std::string> lost_state(const std::optional<AppliedPlan>& current,
                                    const std::vector<Participant>& participants);

// The PlanUpdate for a switch to `next` (numbered by its version). The controller fills in the
// rendezvous store's endpoint, each agent my_rank.
wire::PlanUpdate plan_update(Epoch epoch, uint64_t step, const PlanSwitch& sw, const plan::Plan& next);

}  // namespace sal::job
