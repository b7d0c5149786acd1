// remap.h — from a new plan to the physical nodes, with the least state moved.
//
// A new plan's positions are abstract; the nodes are real and already hold expert replicas. The
// greedy remap (Lazarus §4.3) gives each position to the node that already holds most of that
// position's replicas (all layers counted), largest overlaps first, so few experts must be fetched.
// The transfer schedule then says, for every replica a node must newly hold, which surviving owner
// sends it, spreading the fetches of each expert over all of its owners.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/result.h"
#include "plan/plan.h"

namespace sal::plan {

// held[node][layer] = the experts node currently holds in that layer (empty for a new node).
using Holdings = std::vector<std::vector<std::vector<ExpertId>>>;

struct Remap {
  std::vector<int32_t> node_of_position;  // plan position -> physical node
  std::vector<int32_t> position_of_node;  // physical node -> plan position, -1 if it gets none
  uint64_t kept = 0;                      // replicas the new plan finds already in place
  uint64_t fetched = 0;                   // replicas that must be transferred
};

// Maps positions onto alive nodes only (alive[node]); needs at least as many alive nodes as
// positions. What a dead node held is still counted as a source nowhere. A plan with failure
// domains (plan.domains) gives position p only to a node of its domain: `domain_of_node[node]`
// (the same labels; fails, naming the position, when its domain has no node left for it).
Result<Remap> greedy_remap(const Holdings& held, const std::vector<bool>& alive, const Plan& plan,
                           const std::vector<uint32_t>& domain_of_node = {});

// The remap that keeps `order`'s nodes in their order (the i-th gets position i): what keeps the
// workers' data planes (a plane of the same ranks in the same order is kept, not connected again).
// None when `order` does not name exactly as many alive nodes as the plan has positions, or a node
// would leave its failure domain.
std::optional<Remap> ordered_remap(const Holdings& held, const std::vector<bool>& alive, const Plan& plan,
                                   const std::vector<uint32_t>& order, const std::vector<uint32_t>& domain_of_node = {});

// The experts that workers holding `held` ([layer][node]: each node's experts, as a placement)
// fetch to take `next` ([layer][position], as many layers and positions), its positions mapped
// onto them by greedy_remap: what a re-plan on the same workers moves (a node fetches an expert it
// lacks once, however many of its slots it fills: the "expert replicas moved" of a plan switch).
// Fails on shapes that differ, and on an expert id (0-based) not below its layer's slot count.
using LayerSlots = std::vector<std::vector<std::vector<ExpertId>>>;
struct Fetched {
  uint64_t total = 0;  // over every worker
  uint64_t most = 0;   // by the worker fetching the most (the switch's migration waits for it)
};
Result<Fetched> replicas_fetched(const LayerSlots& held, const LayerSlots& next);

struct Transfer {
  uint32_t layer = 0;
  ExpertId expert = 0;
  uint32_t from_node = 0;
  uint32_t to_node = 0;
};

// Fetches of every missing replica, each from a node that holds the expert now and survives
// (`alive[node]`). Fetches with the fewest possible sources are placed first, each on its least
// busy owner, so the sending is spread over all owners. Fails when an expert has no surviving
// owner (then only a checkpoint can restore it), naming the layer and expert — unless `rebuilt`
// names it ((layer, expert): its new holders rebuild it themselves, nothing is fetched).
using LayerExpert = std::pair<uint32_t, ExpertId>;
Result<std::vector<Transfer>> transfer_schedule(const Holdings& held, const std::vector<bool>& alive,
                                                const Plan& plan, const Remap& remap,
                                                const std::set<LayerExpert>& rebuilt = {});

}  // namespace sal::plan
