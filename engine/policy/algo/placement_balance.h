// placement_balance.h — evens out one layer's expert work without changing anything that decides
// its recovery: the second half of the `mro` placement policy (docs/placement.md).
//
// Work: the flexible dispatcher splits each expert's tokens evenly over its replicas, so node n
// computes W_n = sum over its slots of load_e / r_e. Balance is max_n W_n over the mean (1 = even),
// the figure `salamander policy plan` and job.plan() print.
//
// Recovery: after k random node failures an expert is lost when every node holding it failed, so
// P(k) depends only on the family of inclusion-minimal node sets among the experts' node sets.
// Any placement with the same family has the same P(k) for every k — it is exactly as good as mro.
// The balancer changes placements only in ways that keep the family, checked move by move: every
// changed expert's new node set contains a minimal set that some expert still realizes (holds on
// exactly its nodes), and every minimal set is still realized. Then no new set is minimal and no
// old one stops being, so the family is the same. Each expert also keeps spanning at least
// min(floor, N, r_e) nodes.
//
// Two phases, both deterministic:
//  1. Re-deal. Each expert keeps its replicas on the nodes of one minimal set inside its node set
//     (an expert that realizes a minimal set keeps every replica); its other replicas are dealt
//     again, heaviest first, each to the node with the least work that has a free slot and does not
//     hold the expert yet (the classic longest-processing-time greedy).
//  2. Local search, steepest descent from the busiest node: swap a replica there with a lighter one
//     elsewhere, or swap an expert's replicas on one minimal set with a lighter expert's on another
//     minimal set of the same size (this is how experts that realize minimal sets move between
//     blocks, e.g. the least replicated experts spread over their blocks instead of filling some).
//     A move is taken when it lowers the busiest node's work, or keeps it and lowers the sum of
//     squares; bounded by an evaluation budget.
// The result is never worse than the start (the start is returned when nothing improves it).
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "policy/algo/recovery.h"

namespace sal::algo {

// max_n W_n / mean_n W_n of one layer for per-expert loads (1 when there is no load). Errors as
// balance_placement's.
Result<double> placement_imbalance(const LayerPlacement& layer, const std::vector<double>& loads);

struct BalanceOptions {
  int floor = 1;                 // each expert must keep spanning ≥ min(floor, N, r_e) nodes
  uint64_t max_evaluations = 0;  // candidate moves scored in phase 2; 0: a default (a few ms)
  bool redeal = true;            // phase 1; off for a start already dealt least loaded first
};

struct BalanceResult {
  LayerPlacement layer;        // same node count, slots per node, replica counts and minimal sets
  double before = 1, after = 1;  // imbalance of the start and of the result
  int moves = 0;               // phase-2 moves taken
  uint64_t evaluations = 0;
};

// Errors: loads shorter than the expert ids used, a negative load, no nodes.
Result<BalanceResult> balance_placement(const LayerPlacement& start, const std::vector<double>& loads,
                                        const BalanceOptions& options = {});

}  // namespace sal::algo
