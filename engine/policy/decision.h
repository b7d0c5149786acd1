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

enum class Kind : uint8_t { allocation, placement, checkpoint, redundancy };
constexpr Kind kKinds[] = {Kind::allocation, Kind::placement, Kind::checkpoint, Kind::redundancy};
std::string_view kind_name(Kind k);
bool parse_kind(std::string_view s, Kind& out);

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
  double restore_s = 0;   // what losing every replica of an expert costs (restore + steps run again)
  std::string restore_source;  // how restore_s was reckoned
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

using Input = std::variant<AllocationInput, PlacementInput, CheckpointInput, RedundancyInput>;
using Proposal = std::variant<AllocationProposal, PlacementProposal, CheckpointProposal, RedundancyProposal>;

inline Kind kind_of(const Input& in) { return Kind(in.index()); }
inline Kind kind_of(const Proposal& p) { return Kind(p.index()); }

}  // namespace sal::policy
