// plan_fields.h — the plan (plan/plan.h) on the wire, as it is: the field lists of plan::Plan and
// the values it holds, so a PlanUpdate carries the very value the planner made and the worker
// follows (no flattened copy to decode by index arithmetic). Bounds: a plan of up to kPlanRanks
// positions, kPlanLayers layers, kPlanSlots slots per position; a checkpoint window of up to
// kPlanOperators operators; stacks and groups of up to kPlanRanks groups.
#pragma once

#include <cstddef>

#include "plan/plan.h"
#include "wire/fields.h"

namespace sal::wire {

constexpr size_t kPlanRanks = 1u << 16;
constexpr size_t kPlanLayers = 1024;
constexpr size_t kPlanSlots = 1024;
constexpr size_t kPlanOperators = 1u << 20;

template <>
struct Fields<plan::LayerPlan> {
  template <class S, class V>
  static void visit(S& s, V& v) {
    v("replicas", s.replicas, kPlanOperators);
    v("placement", s.placement, kPlanRanks);
  }
};

template <>
struct Fields<plan::CheckpointSchedule> {
  template <class S, class V>
  static void visit(S& s, V& v) {
    v("window", s.window);
    v("period", s.period);
    v("slots", s.slots, kPlanOperators);
  }
};

template <>
struct Fields<plan::ShardStacks> {
  template <class S, class V>
  static void visit(S& s, V& v) {
    v("redundancy", s.redundancy);
    v("hosts", s.hosts, kPlanRanks);
    v("alive", s.alive, kPlanRanks);
    v("assignment", s.assignment, kPlanRanks);
    v("wipeout", s.wipeout);
  }
};

template <>
struct Fields<plan::Plan> {
  template <class S, class V>
  static void visit(S& s, V& v) {
    v("version", s.version);
    v("nodes", s.nodes);
    v("slots", s.slots);
    v("experts", s.experts);
    v("floor", s.floor);
    v("layers", s.layers, kPlanLayers);
    v("schedule", s.schedule);
    v("stacks", s.stacks);
    v("groups", s.groups, kPlanRanks);
    v("domains", s.domains, kPlanRanks);
    v("racks", s.racks, kPlanRanks);
  }
};

}  // namespace sal::wire
