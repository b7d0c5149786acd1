// strategy.h — a strategy under test: how a job uses the live nodes and what it does when one fails
// or returns. The engine (trial.h) owns time, the nodes and the checkpoint model; a strategy only
// answers questions about its own configuration, so each is a small module:
//   salamander          allocation + placement policies over every live node, elastic recovery
//                       while every expert keeps a replica, restore from the checkpoint otherwise
//   checkpoint-restart  the same plans, but any change of the nodes in use restores the checkpoint
//   fixed-ep-ft         whole expert-parallel groups; a restore only when no whole group is left
//   spare, replication, checkpoint-only
//                       data-parallel groups that each hold the whole model (SPARe's stacks with
//                       the redundancy policy and the reordering controller; r-fold replication;
//                       neither: every failure restarts)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "sim/scenario.h"

namespace sal::sim {

class Workload;

// What the engine shows a strategy.
struct SimView {
  const Scenario& scenario;
  const StrategySpec& spec;
  const Workload& workload;
  const std::vector<bool>& up;   // per node, now
  double now = 0;
  int64_t step = 0;              // the next step to run
};

struct Reaction {
  enum class Kind {
    none,         // the node was not in use: nothing happens
    masked,       // survived in place: a short pause (pause_s), the in-flight step completes
    reconfigure,  // the in-flight step is lost; training resumes after pause_s on a new configuration
    restore,      // state is lost: back to the last checkpoint, then restart (the engine adds its costs)
    wait,         // too few nodes to run at all: stop until `ready()` (state kept)
  } kind = Kind::none;
  double pause_s = 0;
  // Salamander: the failures the placement in force has taken since it was put in force (this one
  // included), and the exact probability that it survives this one given it survived the earlier
  // ones, P(k) / P(k − 1) for k random node failures (−1: not computed).
  int failures_absorbed = -1;
  double p_survive = -1;
  std::string note;
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // The job starts on the nodes up at time 0 (or after a restore: on the nodes up then).
  // Errors when the configuration cannot exist (e.g. fewer slots than experts on every node).
  virtual Status start(const SimView& v) = 0;
  // Whether start() would succeed on these nodes (the engine waits for nodes otherwise).
  virtual bool ready(const SimView& v) const = 0;
  // Compute + communication time of the next step on the current configuration.
  virtual double step_s(const SimView& v) const = 0;
  // A node failed (already marked down in v.up).
  virtual Reaction on_down(const SimView& v, uint32_t node) = 0;
  // A node returned: whether the strategy would take it in (the engine batches joins and applies
  // them at a step boundary through adopt()).
  virtual bool wants(const SimView& v, uint32_t node) const = 0;
  // Takes in the returned nodes at a step boundary: reconfigure (a pause) or restore.
  virtual Reaction adopt(const SimView& v) = 0;
  // A pause ended: the configuration decided at the reaction is now in force.
  virtual void resumed(const SimView& v) { (void)v; }
  // Every `rebalance_every` steps (Salamander): re-plan on the current loads; the pause it costs.
  virtual double rebalance(const SimView& v) { (void)v; return 0; }
  // Expected time between restores, for the oracle checkpoint interval (seconds; ≤ 0: unknown).
  virtual double mean_time_between_restores(const SimView& v) const = 0;
  // Planning calls and their measured wall time (policies really run), for reports.
  uint64_t plans = 0;
  double plan_wall_s = 0;
};

Result<std::unique_ptr<Strategy>> make_strategy(const StrategySpec& spec, const Scenario& s);

// The kinds make_strategy knows.
const std::vector<std::string>& strategy_kinds();

}  // namespace sal::sim
