// cluster.h — the simulated nodes and what makes them fail and return: a failure law per node (each
// node draws from its own generator, seeded by the trial and the node, so every strategy of a trial
// sees the same draws), a Bamboo trace replayed node for node, or a scripted fault list. The
// cluster puts its own events on the engine's queue and turns them into "node n went down/up"
// changes; the engine asks the strategy what they mean.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/result.h"
#include "policy/algo/rng.h"
#include "sim/event_queue.h"
#include "sim/scenario.h"

namespace sal::sim {

// Event kinds the cluster owns (the engine's start at kFirstEngineEvent).
enum ClusterEvent : int { kNodeDown = 1, kNodeUp = 2, kFaultFires = 3, kFirstEngineEvent = 10 };

struct NodeChange {
  uint32_t node = 0;
  bool up = false;
};

class Cluster {
 public:
  static Result<Cluster> make(const Scenario& s, int trial);

  // Marks the initial nodes up and schedules the first events.
  void start(EventQueue& q);
  // Handles one of the cluster's events at time `now`; the changes it made (none when stale).
  std::vector<NodeChange> handle(const Event& e, EventQueue& q);
  // A restart with spares: every failed node comes back now.
  std::vector<NodeChange> replace_failed(double now, EventQueue& q);

  const std::vector<bool>& up() const { return up_; }
  uint32_t live() const { return live_; }
  uint32_t size() const { return uint32_t(up_.size()); }

 private:
  void set(uint32_t node, bool up, std::vector<NodeChange>& out);
  void schedule_failure(uint32_t node, double now, EventQueue& q);
  void schedule_repair(uint32_t node, double now, EventQueue& q);

  const Scenario* s_ = nullptr;
  std::vector<bool> up_;
  uint32_t live_ = 0;
  std::vector<algo::Rng> node_rng_;
  std::vector<uint64_t> life_;   // per node: bumped at each change; stale events carry an old one
  algo::Rng pick_rng_{1};        // random nodes of scripted faults
  std::vector<std::pair<double, NodeChange>> trace_;  // trace: timed changes in order
};

}  // namespace sal::sim
