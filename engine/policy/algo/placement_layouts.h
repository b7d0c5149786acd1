// placement_layouts.h — the layouts the placement frontier (frontier.h) is built from: one layer's
// given replica counts placed on N nodes of c slots with more or less structure for recovery.
//
// After k random node failures an expert is lost when every node holding it failed, so recovery
// depends on the inclusion-minimal expert node sets: few and large is good. Balance depends on how
// evenly the work (each expert's load split over its replicas, as the dispatcher splits it) lands
// on the nodes. `mro` puts the least replicated experts c to a block of nodes — the fewest minimal
// sets any placement can have — but then those nodes hold only cold experts and every hot replica
// crowds onto the others. The constructions here trade between the two ends:
//
//  - "blocks of g" (1 ≤ g ≤ c): experts from the least to the most replicated, cut into groups of
//    g; each group takes a block of consecutive nodes (wrapping around) as long as its least
//    replicated member's count, and every member holds one replica on every node of it. The blocks
//    follow each other from node 0, so with fewer experts per block they cover more nodes and the
//    cold replicas spread over all of them; where the blocks go round the ring again, a block lands
//    on the nodes of an earlier one of the same size (the same node set: no new minimal set).
//    Within each run of equally replicated experts the hot ones are dealt over the run's groups in
//    snake order, so no block gathers them. g = c is mro's structure.
//  - "balance first" (g = 0): no blocks.
//  - "chain": one expert a block, each block starting one node after the last (expert k of the
//    ascending order on nodes k .. k + r_k - 1, round the ring): two-replica experts pair each
//    node with its neighbours, so the holder sets form a ring. Fewer minimal sets than "mixed"
//    (P(2) and P(3) between it and the blocks), and still no closed group: a step's excess on one
//    node passes along the ring.
//  - "mixed": no blocks, and the opposite of them: each replica (the most replicated experts first)
//    goes to the node with room that shares the fewest experts with the expert's holders so far
//    (ties: the most room), so the experts' holder sets overlap as little as the slots allow. The
//    loads play no part (layers with the same replica counts get the same sets; the balancer then
//    places the experts on them by load). Its minimal sets are many and small
//    (the worst P(2) of these), and in return no group of nodes holds its experts alone: where a
//    step routes more to some experts than the mean, their holders can pass the excess on to
//    other nodes through the experts they share, which closed blocks cannot (step_balance.h).
//
// In the first two, every replica not in a block is dealt heaviest first to the least loaded node with a
// free slot that does not hold its expert yet (longest processing time first); a second copy on a
// node only when every node with room holds one already. Where that leaves an expert on fewer than
// min(floor, N, r_e) nodes (the last free slots all on nodes holding it), a second copy trades
// places with another expert's replica that keeps its own span.
#pragma once

#include <vector>

#include "core/result.h"
#include "policy/algo/recovery.h"

namespace sal::algo {

// What one layer's placement must hold.
struct LayerDemand {
  std::vector<int> replicas;  // r_e: replicas of expert e (Σ r_e = N·c)
  std::vector<double> loads;  // t_e: tokens routed to expert e (any scale)
};

// The layout of one layer with `group` experts per block (0: balance first); `floor` as the
// validator's. Errors: replica counts that do not fill the N·c slots, a negative count or load,
// loads and replicas of different lengths. The layout may still miss the floor where no trade can
// mend it (check with spans_floor).
Result<LayerPlacement> blocks_layout(const LayerDemand& layer, int nodes, int slots, int group, int floor);

// The "chain" and "mixed" layouts of one layer (above); errors and the floor as blocks_layout's.
Result<LayerPlacement> chain_layout(const LayerDemand& layer, int nodes, int slots, int floor);
Result<LayerPlacement> mixed_layout(const LayerDemand& layer, int nodes, int slots, int floor);

// True when every expert spans at least min(floor, N, r_e) distinct nodes (the validator's rule).
bool spans_floor(const LayerPlacement& layer, const std::vector<int>& replicas, int floor);

// The lowest balance (busiest node's work over the mean) any placement of these replicas can
// reach: an expert on at most min(r_e, N) nodes puts t_e / min(r_e, N) on one of them at least.
double balance_bound(const LayerDemand& layer, int nodes);

}  // namespace sal::algo
