// plan.h — the plan value: what the policies decide and what every worker follows, one typed value
// from the planner through the wire (wire/plan_fields.h) to the runtime. A Plan is, per MoE layer,
// the number of replicas of each expert and the expert held in every slot of every node position
// (allocation + placement); the checkpoint-window policy's schedule; the redundancy policy's shard
// stacks; its data-parallel groups (how many positions each group has: group g is the contiguous
// run of positions after groups 0..g-1; empty = one group of every position); and its version (the
// plan's number in the job). Positions are plan coordinates; remap.h
// maps physical nodes onto them (a plan position is a worker's rank). Expert ids and positions are 0-based here and in plan files (Lua policies see
// them 1-based; the policy layer converts).
//
// Plan file format (JSON, `salamander policy plan --json`, and the controller's journal):
//   {"version": v, "nodes": N, "slots": c, "floor": f,
//    "layers": [{"replicas": [r_0, ...], "placement": [[expert ids of node 0's slots], ...]}, ...],
//    "experts": E, "schedule": {"window", "period", "slots"}, "stacks": {"redundancy", "hosts",
//    "alive", "assignment", "wipeout"}, "groups": [positions of group 0, ...],
//    "domains": [failure domain of position 0, ...], "racks": [rack of domain 0, ...]}
// (All but "layers" are optional when reading: nodes, slots and experts are derived from the
// layers; version, schedule, stacks and groups are written only when set.)
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "plan/schedule.h"

namespace sal::plan {

using ExpertId = uint32_t;

// One layer: replicas[e] and, per node position, the experts in its slots (repeats allowed: two
// replicas of one expert on one node mean twice the capacity there).
struct LayerPlan {
  std::vector<uint32_t> replicas;
  std::vector<std::vector<ExpertId>> placement;
};

struct Plan {
  uint64_t version = 0;  // the plan's number in its job (1, 2, ...); 0: not yet numbered
  uint32_t nodes = 0;
  uint32_t slots = 0;
  uint32_t experts = 0;
  uint32_t floor = 1;  // the fault-tolerance floor the allocation guarantees (f, possibly lowered)
  std::vector<LayerPlan> layers;
  CheckpointSchedule schedule;  // which operators take a full snapshot at each iteration
  ShardStacks stacks;           // which data-parallel group computes which shard types
  std::vector<uint32_t> groups; // positions per data-parallel group, in order (0: a group that is down)
  // The failure domain (host) of each position: 0-based labels, positions with one label must run
  // on workers of one host (domains.h). Empty: any worker may take any position.
  std::vector<uint32_t> domains;
  // The rack of each failure domain (racks[d] for host d): 0-based labels, a rack fails with all
  // its hosts (mesh.racks). Empty: no racks named, every host its own.
  std::vector<uint32_t> racks;
};

// Data-parallel groups (parallel.groups): each group's positions are a contiguous run; every
// position of a one-group plan (groups empty) is in group 0.
struct GroupSpan {
  uint32_t group = 0, first = 0, count = 0;  // count: the group's positions
};
uint32_t group_count(const Plan& p);             // 1 when groups is empty
GroupSpan group_of(const Plan& p, uint32_t pos);  // the group holding position `pos`
GroupSpan group_span(const Plan& p, uint32_t g);
// Checks that the groups cover the plan's positions exactly and that every group up holds every
// expert of every layer at least once (a group is a whole model).
Status check_groups(const Plan& p);

// The same experts in the same slots of the same positions (what a worker holds is the same).
bool same_placement(const Plan& a, const Plan& b);

Result<Plan> plan_from_json(const nlohmann::json& j);
nlohmann::ordered_json plan_to_json(const Plan& p);

// Per expert, the distinct node positions holding it in a layer.
std::vector<std::vector<uint32_t>> expert_nodes(const LayerPlan& layer, uint32_t experts);

// A layer's replica units per expert per position: counts[e][position] (two slots of one expert on
// one position are one unit with twice the capacity there).
std::vector<std::vector<uint32_t>> replica_counts(const LayerPlan& layer, uint32_t experts);
// The first (layer, expert) that none of `positions` holds in the replica table `counts`
// ([layer] counts[expert][position], replica_counts's per layer); none where those positions hold a
// whole model between them (a group's ranks left after a loss, say).
std::optional<std::pair<uint32_t, uint32_t>> missing_expert(const std::vector<std::vector<std::vector<uint32_t>>>& counts,
                                                            const std::vector<uint32_t>& positions);
// What position `pos` holds, slot by slot, layer by layer: (layer, expert) pairs.
std::vector<std::pair<int, int>> held_by(const Plan& p, uint32_t pos);
// Checks that the placement is the shape the plan claims: `layers` layers of `nodes` positions of
// `slots` experts each, every expert id below `experts`. Names the first entry that is not.
Status check_shape(const Plan& p, size_t layers);

}  // namespace sal::plan
