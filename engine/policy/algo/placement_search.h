// placement_search.h — a bounded local search that improves one layer's expert placement in the
// order the `mro` placement policy must win (issue 3, docs/placement.md): placement A beats B when,
// at the first number of failed nodes k where their survival probabilities differ, A's is higher.
// Fewest failures matter most.
//
// Scoring is exact: killed[k] counts the k-node failure sets after which some expert has lost every
// replica, for every k at once, over all 2^N subsets of the nodes (a superset-closure on a bitset of
// 2^N bits), so P(k) = 1 − killed[k] / C(N, k) and "higher P at the first differing k" is "fewer
// killed sets at the first differing k". That limits the search to N ≤ kMaxSearchNodes nodes: mro
// calls it on small layers, or on a small tail region of a large one.
//
// The search keeps every node's slot count and every expert's replica count (its only move swaps two
// replicas between two nodes) and treats validity — every counted expert on at least
// min(floor, N, replicas) distinct nodes — as the first criterion, so it also repairs an invalid
// start. It starts from the given placement, from round robin over the same replicas (what the
// `spread` policy does), and from the best "blocks + spread" layout (the t least replicated experts
// in MRO blocks, every other replica dealt greedily), then runs iterated local search: first-improving
// swaps with a few sideways moves, random kicks, and a fixed budget of evaluations. Deterministic for
// a seed. It is a heuristic: it returns the best placement it saw, never a proof of optimality.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "policy/algo/recovery.h"

namespace sal::algo {

// The most nodes the exact 2^N scoring accepts (2^16 bits = 8 KiB per evaluation).
constexpr int kMaxSearchNodes = 16;

// killed[k], k = 0..N: the k-node failure sets after which some counted expert has no replica left.
using FailureCounts = std::vector<uint64_t>;

// Exact counts for one layer of at most kMaxSearchNodes nodes. `ignore[e]` leaves expert e out (its
// survival is decided elsewhere); an empty vector counts every expert. An expert id that appears on
// no node counts as lost under every failure set.
Result<FailureCounts> failure_counts(const LayerPlacement& layer, const std::vector<bool>& ignore = {});

// < 0 when `a` is better (fewer killed sets at the first k where the two differ), > 0 when `b` is,
// 0 when they are equal. Both must come from layers with the same number of nodes.
int compare_failure_counts(const FailureCounts& a, const FailureCounts& b);

struct PlacementSearchOptions {
  int floor = 1;                 // a counted expert must span ≥ min(floor, N, its replicas) nodes
  std::vector<bool> ignore;      // per expert id: placed, moved, but neither scored nor span-checked
  uint64_t max_evaluations = 0;  // 0: a default scaled to N (about 5 ms of work)
  uint64_t seed = 1;
};

struct PlacementSearchResult {
  LayerPlacement layer;       // same node count, slots per node and replica counts as the start
  FailureCounts killed;       // of `layer`
  bool valid = false;         // every counted expert spans enough nodes
  bool improved = false;      // strictly better than the start (validity first, then killed)
  std::string start;          // where the best came from: "given", "round-robin", "blocks+spread"
  uint64_t evaluations = 0;   // placements scored
};

// Improves `start` (which may be invalid). Errors: more than kMaxSearchNodes nodes, no nodes, an
// expert id outside 0..experts-1, a negative floor.
Result<PlacementSearchResult> search_placement(const LayerPlacement& start,
                                               const PlacementSearchOptions& options = {});

}  // namespace sal::algo
