// decision.h — what each kind of policy is asked (its input, the `ctx` a Lua policy receives) and
// what it answers (its proposal). C++ owns both shapes: inputs are built by the controller, the
// CLI or a test; proposals are read back from Lua, checked by the validators, then applied.
//
// Indices are 0-based here. Lua policies see layers, experts, nodes, operators and shard types
// 1-based, as Lua expects; lua_bridge.cpp converts in both directions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "plan/schedule.h"

namespace sal::policy {

enum class Kind : uint8_t { allocation, placement, checkpoint, redundancy, health };
constexpr Kind kKinds[] = {Kind::allocation, Kind::placement, Kind::checkpoint, Kind::redundancy, Kind::health};
std::string_view kind_name(Kind k);
bool parse_kind(std::string_view s, Kind& out);

// Recent steps' routed tokens, [step][layer][expert] (the load window's; PlacementInput::steps).
using StepLoads = std::vector<std::vector<std::vector<uint32_t>>>;
// How many of the most recent steps a placement is told (ctx.steps), to judge each layout on the
// steps' own split: the routing the plan is decided for.
constexpr size_t kPlacementSteps = 16;

struct AllocationInput {
  uint32_t nodes = 0, slots = 0, experts = 0;
  uint32_t min_replicas = 1;                // f as configured (the floor may have to be lowered)
  std::vector<std::vector<double>> loads;   // [layer][expert] tokens over the recent window
};
struct AllocationProposal {
  std::vector<std::vector<uint32_t>> replicas;  // [layer][expert]
  uint32_t floor = 1;                           // the floor the allocation guarantees
  std::string note;                             // e.g. "f lowered from 2 to 1: ..."
};

// What is known about node failures, for weighing balance against survival (the default
// placement's expected goodput; failure_facts.h fills it). ctx.failures in Lua.
struct FailureFacts {
  double rate = 0;        // node failures per node and hour
  std::string source;     // where the rate comes from: "measured: ...", "job file: ...", "assumed: ..."
  double correlated = 0;  // probability that a loss takes another node down before the re-plan
  double window_s = 0;    // a second loss this soon after the first counts as simultaneous
  double restore_s = 0;   // what losing every replica of an expert costs beyond an elastic recovery
  std::string restore_source;  // how restore_s was reckoned
};

// What re-placing costs, for a placement that weighs the placement in force (kept) against a better
// one (ctx.moves): the seconds one worker takes to fetch one expert replica in a plan switch
// (measured by the driver: each receiving worker's migration over the replicas it received) and
// how long a placement is expected to stand (until the next rebalance or the next node loss,
// whichever comes first). replica_s 0: no switch that moved experts was measured yet (ctx.moves is
// then absent and the policy keeps a fixed margin).
struct MoveFacts {
  double replica_s = 0;
  double horizon_s = 0;
  std::string source;  // how both were reckoned
};

struct PlacementInput {
  uint32_t nodes = 0, slots = 0, experts = 0;
  uint32_t floor = 1;                                         // from the allocation
  std::vector<std::vector<uint32_t>> replicas;                // [layer][expert]
  std::vector<std::vector<double>> loads;                     // [layer][expert]
  std::vector<std::vector<std::vector<uint32_t>>> current;    // [layer][node][slot]; may be empty
  FailureFacts failures;                                      // rate 0: nothing known (the CLI)
  // Workers per host (failure domain), when some host has several: the engine deals the positions
  // decided onto the hosts afterwards (plan/domains.h). Empty: one worker per host.
  std::vector<uint32_t> hosts;
  // The rack of each of those hosts (0-based here, 1-based in Lua), when the job names racks
  // (mesh.racks): the deal spreads replicas over racks first. Empty: none.
  std::vector<uint32_t> racks;
  // The load window's recent steps, each one's tokens per expert ([step][layer][expert]): the steps'
  // own routing, which the dispatcher splits step by step. Empty: none measured yet.
  StepLoads steps;
  bool dispatch_by_counts = true;  // train.dispatch: "counts" (else "even")
  MoveFacts moves;
};
struct PlacementProposal {
  std::vector<std::vector<std::vector<uint32_t>>> placement;  // [layer][node][slot] = expert
  std::string note;    // the policy's reasoning, for people (job.plan().note, the plan log line)
  std::string choice;  // the same as data (JSON text; job.plan().placement), "" when none
};

struct OperatorInfo {
  std::string name;        // "layer3.expert7", "layer3.gate", "layer3.dense", "embedding"
  std::string kind;        // expert | gate | dense | embedding
  int32_t layer = -1;
  int32_t expert = -1;
  double full_bytes = 0;     // weights + optimizer state (a full snapshot)
  double compute_bytes = 0;  // weights only (what frozen replay needs)
  double popularity = 0;     // activation frequency (experts); 0 for the rest
};
struct CheckpointInput {
  std::vector<OperatorInfo> operators;
  double iteration_s = 1.0;     // measured time of one iteration
  double bandwidth_Bps = 16e9;  // device -> host copy bandwidth
  uint64_t iteration = 0;
  bool has_current = false;
  plan::CheckpointSchedule current;
};
using CheckpointProposal = plan::CheckpointSchedule;

struct RedundancyInput {
  uint32_t groups = 0;           // data-parallel groups (each holds a whole model)
  std::vector<bool> alive;       // per group
  uint32_t redundancy = 0;       // requested r; 0: the policy chooses
  bool has_current = false;
  plan::ShardStacks current;
};
using RedundancyProposal = plan::ShardStacks;

// One worker as the health policy sees it (job/health.h's verdict on its speed).
struct WorkerHealthInfo {
  std::string name;       // "2.0": node 2's first worker
  uint32_t node = 0;
  double ratio = 1;       // its computing time over the others' for the same work (the window's median)
  double lag = 1;         // its computing time over the others' in the same step, whatever its share (median)
  bool slow = false;      // the speed watch's verdict
  uint64_t steps = 0;     // steps measured in its window (the verdict needs a full window)
  uint64_t since_step = 0;  // the step of its last verdict (0: none yet)
  double share = 1;       // the share of an even part of the work it gets now (1: even)
  uint64_t corrupt = 0;   // its copies found to disagree with their unit's majority so far (repaired)
};
struct HealthInput {
  uint64_t step = 0;                       // the last committed step
  uint32_t window = 20;                    // steps a verdict looks at
  double slow_ratio = 1.5, back_ratio = 1.25;
  uint32_t min_workers = 1;                // draining below this many workers is refused
  std::vector<WorkerHealthInfo> workers;   // the plan's ranks, in rank order
};
// What to do about each worker: its share of the work (relative: 1 is an even part; 0.5 half of
// one), and the workers whose nodes leave the job (drained: they finish nothing more, the job
// re-plans without them).
struct HealthProposal {
  std::vector<double> shares;   // per worker of the input, in (0, 1]
  std::vector<uint32_t> drain;  // worker positions (0-based here)
  std::string note;             // the policy's reasoning, for people (the health event)
};

using Input = std::variant<AllocationInput, PlacementInput, CheckpointInput, RedundancyInput, HealthInput>;
using Proposal =
    std::variant<AllocationProposal, PlacementProposal, CheckpointProposal, RedundancyProposal, HealthProposal>;

inline Kind kind_of(const Input& in) { return Kind(in.index()); }
inline Kind kind_of(const Proposal& p) { return Kind(p.index()); }

}  // namespace sal::policy
