// plan_recovery.h — a plan's placement as the recovery counter sees it (policy/algo/recovery.h):
// over its worker positions, or over its failure domains (hosts), the unit that fails together, or
// over its racks (a rack fails with all its hosts). A plan without domains has one worker per host:
// both are the same.
#pragma once

#include <vector>

#include "plan/plan.h"
#include "policy/algo/recovery.h"

namespace sal::policy {

// Per layer, each position's experts.
std::vector<algo::LayerPlacement> placements_of(const plan::Plan& p);
// Per layer, each host's experts (what its positions hold; plan/domains.h).
std::vector<algo::LayerPlacement> host_placements_of(const plan::Plan& p);
// The hosts a plan runs on: its domains, else its positions.
uint32_t host_count(const plan::Plan& p);
// Per layer, each rack's experts (what the positions of its hosts hold); empty without racks.
std::vector<algo::LayerPlacement> rack_placements_of(const plan::Plan& p);

}  // namespace sal::policy
