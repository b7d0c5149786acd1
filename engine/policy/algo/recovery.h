// recovery.h — the probability that an expert placement survives k node failures (Lazarus,
// "Resilient and Elastic Training of MoE Models", §4): the k failed nodes are a uniformly random
// k-subset F of the N nodes, and a layer survives F iff every expert keeps a replica on some node
// outside F. P(k) = #{F : |F| = k, the layer survives} / C(N, k). Jointly for several layers the
// same F must spare every expert of every layer.
//
// Only inclusion-minimal expert node sets matter (an expert is lost exactly when its whole node set
// failed, so an expert whose set contains another's is lost no more often), and only those of at
// most k nodes. Three ways to count, and the answer says which was used:
//  - closed form, when those minimal sets are pairwise disjoint (MRO's nested/disjoint placements):
//    the coefficient of x^k in Π_i Σ_{j<s_i} C(s_i, j) x^j · (1+x)^(N − Σ s_i) — all terms
//    positive, so no cancellation; long double keeps ~1e-15 relative accuracy at N = 1024;
//  - exact counting for k ≤ 3 whatever the overlap: the failure sets holding a critical singleton,
//    pair or triple, by inclusion–exclusion over the graph of critical pairs (recovery_count.h);
//  - exact enumeration of the failure sets restricted to the nodes of those sets, when that is at
//    most `enumeration_limit` subsets (the other nodes only multiply by a binomial);
//  - Monte Carlo otherwise: uniform k-subsets from a seeded generator, with a Wilson 95 % interval.
// Trivial cases are exact: an expert with no replica (P = 0), k ≥ N (every node failed: P = 0 when
// there is any expert), no minimal set of ≤ k nodes (P = 1).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace sal::algo {

// One MoE layer's placement: nodes[n] lists the expert ids in node n's slots (an expert may fill
// several slots of one node). Expert ids are 0..experts-1; an id found on no node has no replica.
struct LayerPlacement {
  int experts = 0;
  std::vector<std::vector<int>> nodes;
};

enum class RecoveryMethod { exact, closed_form, monte_carlo };

// "exact", "closed-form", "monte-carlo" (the names the CLI and Lua use).
std::string_view method_name(RecoveryMethod m);

enum class MethodChoice { automatic, exact, closed_form, monte_carlo };

struct RecoveryOptions {
  MethodChoice method = MethodChoice::automatic;  // a forced method errors when it does not apply
  uint64_t enumeration_limit = 10'000'000;        // most failure subsets an exact count may visit
  uint64_t samples = 200'000;                     // Monte-Carlo samples per failure count
  uint64_t seed = 1;                              // Monte-Carlo seed (same seed, same answer)
};

struct RecoveryEstimate {
  int failures = 0;  // k
  double p = 1;      // probability of survival
  double lo = 1;     // 95 % interval (lo = hi = p for exact methods)
  double hi = 1;
  RecoveryMethod method = RecoveryMethod::exact;
  // Work done: subsets visited (exact; for k ≤ 3 the critical sets counted), disjoint minimal node
  // sets multiplied (closed form), samples drawn (Monte Carlo); 0 for the trivial cases.
  uint64_t count = 0;
};

// P(the layer survives `failures` random node failures).
Result<RecoveryEstimate> recovery_probability(const LayerPlacement& layer, int failures,
                                              const RecoveryOptions& options = {});

// P(every layer survives the same `failures` random node failures). All layers must have the same
// number of nodes.
Result<RecoveryEstimate> joint_recovery_probability(const std::vector<LayerPlacement>& layers,
                                                    int failures,
                                                    const RecoveryOptions& options = {});

struct RecoveryReport {
  std::vector<RecoveryEstimate> layers;  // each layer on its own
  RecoveryEstimate joint;                // all layers together
};

// Per layer and jointly, for one failure count.
Result<RecoveryReport> recovery_report(const std::vector<LayerPlacement>& layers, int failures,
                                       const RecoveryOptions& options = {});

// The joint probability for k = 0..max_failures (one entry per k), sharing the work between k.
Result<std::vector<RecoveryEstimate>> recovery_curve(const std::vector<LayerPlacement>& layers,
                                                     int max_failures,
                                                     const RecoveryOptions& options = {});

}  // namespace sal::algo
