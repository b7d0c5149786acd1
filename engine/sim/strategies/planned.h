// planned.h — internal to the strategies that place experts on nodes: the physical holdings of a
// plan (which node holds which experts), put in force through the greedy remap so the fewest
// experts move, the migration time that costs (transfers spread over every owner), and the exact
// recovery probability of the holdings under k random node failures (the policy library's).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/result.h"
#include "plan/plan.h"
#include "plan/remap.h"
#include "policy/algo/recovery.h"
#include "sim/scenario.h"

namespace sal::sim {

class Holdings {
 public:
  explicit Holdings(uint32_t nodes = 0) : held_(nodes) {}

  // Maps `p` onto the nodes up (greedy remap from what they hold now); the transfers it needs and
  // the seconds they take (the busiest node's sends or receives at p2p bandwidth).
  struct Change {
    plan::Remap remap;
    uint64_t transfers = 0;
    double migrate_s = 0;
  };
  Result<Change> apply(const plan::Plan& p, const std::vector<bool>& up, const Scenario& s) const;
  // Puts a change in force: nodes hold the plan's experts.
  void commit(const plan::Plan& p, const Change& c);
  // Forget everything (a restore reloads from the checkpoint).
  void clear();
  // A node failed: what it held is gone.
  void lose(uint32_t node);

  // Every expert of every layer still held by some node.
  bool complete(uint32_t experts) const;
  // Holds anything (is part of the configuration).
  bool holds(uint32_t node) const;

  // P(the placement in force survives k random failures of its nodes), cached per k (−1: none).
  double p_survive(int k);
  // P(it survives the k-th failure | it survived the first k − 1): P(k) / P(k − 1).
  double p_survive_next(int k);

 private:
  plan::Holdings held_;                     // [node][layer] experts
  std::vector<algo::LayerPlacement> placed_;  // the placement in force, over its nodes (for the curve)
  std::map<int, double> curve_;
};

}  // namespace sal::sim
