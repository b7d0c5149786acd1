// fixed_ep.h — the plans of the baselines (DeepSpeed-MoE style): fixed expert-parallel groups.
// An EP group is the fewest workers whose slots hold every expert once (ep = ceil(E / slots));
// member i of every group holds the same slice of experts (E / ep of them, cycled to fill its
// slots), and the groups are data-parallel copies of each other. Such a job uses a multiple of ep
// workers and leaves the rest idle.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "plan/plan.h"

namespace sal::plan {

uint32_t ep_size(uint32_t experts, uint32_t slots);

// `groups` whole EP groups (nodes = groups * ep); rank r is member r % ep of group r / ep.
Result<Plan> fixed_ep_plan(uint32_t layers, uint32_t experts, uint32_t slots, uint32_t groups);

}  // namespace sal::plan
