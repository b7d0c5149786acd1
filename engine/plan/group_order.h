// group_order.h — the order of a grouped plan's data-parallel groups that keeps the most group
// data planes when the plan is switched to.
//
// A plan's groups are contiguous runs of positions, in group order (plan.h), and the workers take
// the positions in their order (the plan in force's ranks first, plan_switch.h), which keeps the
// job's data plane. A group whose workers are exactly a group of the plan in force, in the same
// order, also keeps that group's data plane instead of connecting one; a regroup that shifts
// every group after the one that lost a worker connects them all again. The planner sizes the
// groups and decides their stacks without knowing which workers will take them, so the order is
// chosen here: order_groups finds the order of the groups (by their sizes) that lines the most
// surviving groups up with the workers' order, and permute_groups puts a plan's groups in that
// order, each group's positions (slot tables, failure domains) and stacks with it. Groups that
// are down (no positions) keep their indices.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "plan/plan.h"

namespace sal::plan {

// A group of the plan in force whose workers all take part in the next plan: its index there and
// its workers in rank order (as ids of the order order_groups is given).
struct IntactGroup {
  uint32_t index = 0;
  std::vector<uint32_t> workers;
};

// `sizes`: the next plan's positions per group (plan.groups); `order`: the workers (ids) in the
// order they take positions, as many as the sizes add up to. Returns perm: the k-th group of the
// arranged plan is the plan's group perm[k]. The identity unless another order keeps more intact
// groups; among orders that keep as many, an intact group keeps its own index where its size allows.
std::vector<uint32_t> order_groups(const std::vector<uint32_t>& sizes, const std::vector<uint32_t>& order,
                                   const std::vector<IntactGroup>& intact);

// How many intact groups the groups of `sizes`, laid out in that order over `order`, keep whole.
uint32_t groups_kept(const std::vector<uint32_t>& sizes, const std::vector<uint32_t>& order,
                     const std::vector<IntactGroup>& intact);

// `p` with its groups in the order perm gives (a permutation of 0..groups-1).
Result<Plan> permute_groups(const Plan& p, const std::vector<uint32_t>& perm);

}  // namespace sal::plan
