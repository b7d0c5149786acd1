// frontier.h — the placement frontier: for given replica counts and loads (every layer of a plan),
// nodes and slots, the placements that no other one beats on both balance and recovery.
//
// Balance is the busiest node's expert work over the mean (1 is even), per layer and averaged over
// the layers — the step waits for each layer's busiest node. On the loads alone it is each expert's
// load split evenly over its replicas; given the window's steps (FrontierOptions::steps) it is
// step_balance.h's: each recorded step's own counts split as the dispatcher splits them, averaged
// over the steps, which is what the steps wait for when the routing moves from step to step (the
// balance on the mean loads is then kept as load_balance). Recovery is P(k), k = 1..K (3 by default): the
// probability that every layer keeps a replica of every expert after k random node failures (the
// same failures for all layers), exact. A point beats another when it is no worse on the mean
// balance and on every P(k), and better on one of them.
//
// The candidates are the constructions of placement_layouts.h — blocks of g experts for g = c down
// to 1 (g = c is mro's structure: the fewest minimal node sets; fewer experts per block spread the
// cold replicas and trade survival of two or three failures for balance), and balance first (no
// blocks), "chain" (holder sets in a ring) and "mixed" (holder sets that overlap as little as
// they can) — each evened out by
// balance_placement (which keeps its minimal node sets, so its P(k)),
// plus any the caller adds (a policy's own plan, the plan in force), taken as they are. Every
// layer of a candidate has the same structure and the blocks start at node 0 in every layer, so
// the layers' minimal sets line up and the plan survives as well as its weakest layer.
//
// This is the frontier of these candidates, not of all placements: a search over all of them is
// out of reach, and the constructions span the trade from mro's end to the balanced end. `bound`
// says how far from the best possible balance each layer is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "policy/algo/placement_layouts.h"
#include "policy/algo/recovery.h"

namespace sal::algo {

struct FrontierOptions {
  int nodes = 0, slots = 0;
  int floor = 1;                    // every expert spans ≥ min(floor, N, r_e) nodes; others are dropped
  int max_failures = 3;             // P(k) for k = 1..max_failures
  uint64_t balance_evaluations = 0;  // per layer and candidate for balance_placement (0: scaled to N)
  // The constructions to build, by name ("blocks-4", "balance-first"); none given: all of them
  // (an empty list: none — only the caller's candidates are weighed).
  std::optional<std::vector<std::string>> only;
  // The window's recorded steps, per layer: steps[l][s][e] = expert e's tokens in step s. Empty:
  // the points are judged on the loads alone. Each layer's list as long as the others.
  std::vector<std::vector<std::vector<uint32_t>>> steps;
  bool split_by_counts = true;      // the dispatcher's split of a step (train.dispatch): by counts, or even
};

// A placement from elsewhere to weigh with the constructions (taken as it is, not balanced).
struct FrontierCandidate {
  std::string name;
  std::vector<LayerPlacement> layers;
};

struct FrontierPoint {
  std::string name;                     // "blocks-8" .. "blocks-1", "balance-first", "chain", "mixed", or a candidate's
  std::vector<LayerPlacement> layers;
  std::vector<double> balance;          // per layer: over the steps when given, else on the loads
  double mean_balance = 1;              // over the layers
  std::vector<double> load_balance;     // per layer, on the (mean) loads: the balance when no steps are given
  double mean_load_balance = 1;
  std::vector<double> p;                // P(k) of the whole plan, k = 1..max_failures (p[k-1])
  bool on_frontier = false;
  std::string beaten_by;                // a point that beats it (or has the same figures and came first)
};

struct Frontier {
  std::vector<FrontierPoint> points;    // every valid candidate, by mean balance (then recovery)
  std::vector<double> bound;            // per layer: the lowest balance these replicas allow
  int invalid = 0;                      // constructions dropped for not meeting the floor
};

// Errors: layers whose replicas do not fill N·c slots, loads and replicas of different lengths,
// a candidate with another number of layers or nodes.
Result<Frontier> placement_frontier(const std::vector<LayerDemand>& layers, const FrontierOptions& options,
                                    const std::vector<FrontierCandidate>& extra = {});

// True when a is no worse than b on the mean balance and every P(k), and better on one.
bool beats(const FrontierPoint& a, const FrontierPoint& b);

// The median of some values (the mean of the middle two for an even count; 1 for none).
double median(std::vector<double> values);

// The median of a point's per-layer balance (the acceptance figure of docs/placement.md).
inline double median_balance(const FrontierPoint& point) { return median(point.balance); }

}  // namespace sal::algo
