// schedule.h — the checkpoint-window policy's output and the redundancy policy's output.
//
// CheckpointSchedule: iteration i snapshots the full state of the operators in
// slots[(i mod period)] when (i mod period) < window, and nothing otherwise; every operator appears
// exactly once in the window (MoEtion: window = W_sparse = period; dense every K: window 1, period K;
// MoC-style round robin: a fixed share per iteration).
//
// ShardStacks (SPARe): groups of data-parallel workers each host r shard types (hosts[g]); in a step
// every alive group computes the shard types in its stack (assignment[g], in order, each one it
// hosts) and every shard type is computed by exactly one group; the step's all-reduce depth is the
// longest stack. When some shard type has no alive host the layout is wiped out and only a restart
// (checkpoint) can continue.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::plan {

struct CheckpointSchedule {
  uint32_t window = 1;
  uint32_t period = 1;
  std::vector<std::vector<uint32_t>> slots;  // window lists of operator indices
  bool operator==(const CheckpointSchedule&) const = default;
};

// Checks a schedule; messages count iterations and operators from `base` (0 for plan files, 1 for a
// Lua policy's proposal, as in validate.h).
Status check_schedule(const CheckpointSchedule& s, size_t operators, uint32_t base = 0);

// Whether the sparse snapshots of schedule `s` are worth taking beside dense snapshots every
// `dense_every` steps (0: none). A restore takes the newer of the two (job/ladder.h), and the
// steps it runs again are, on average, W + (P - 1) / 2 from the newest complete sparse window (its
// W iterations, its last slot still on its way, half a period since it completed) against
// (D - 1) / 2 from the dense snapshot: when the sparse window does not come out ahead, its copies
// cost every iteration and restore nothing the dense snapshot would not. Upstream logs
// (train.expert_logs) rebuild a lost expert without running any step again, so with them the
// sparse snapshots always count. Empty when taken, else why not, for the logs and job.checkpoint().
std::string sparse_not_taken(const CheckpointSchedule& s, int64_t dense_every, bool expert_logs);
// The steps a restore runs again on average, as above.
double sparse_rerun_steps(const CheckpointSchedule& s);
double dense_rerun_steps(int64_t dense_every);

// After a patched step commits (SPARe): the steps train on degraded — the dropped groups out, their
// shard types computed by the groups the stacks name — until the next plan (workers joining or
// leaving, a rebalance) (`degraded`); or only while the time they lose against a regrouped plan's
// step (estimated from the steps before the patch) stays under what a plan switch costs, measured,
// then the survivors are re-planned (`cheaper`, the default: never more than twice the better of the
// two in hindsight; at once where workers would sit the degraded steps out at a cost sure to exceed
// a switch); or the survivors are re-planned at once (`regroup`).
enum class AfterPatch : uint8_t { cheaper, degraded, regroup };
const char* after_patch_name(AfterPatch a);

struct ShardStacks {
  uint32_t redundancy = 1;
  std::vector<std::vector<uint32_t>> hosts;       // per group: hosted shard types
  std::vector<bool> alive;                        // per group
  std::vector<std::vector<uint32_t>> assignment;  // per group: shard types computed, in order
  bool wipeout = false;
  // A patch's decision only: what follows the patched step's commit (AfterPatch), and whether the
  // dropped groups' shard types are split over every group still in the step (each computing a
  // part) rather than each computed whole by the group `assignment` gives it to.
  AfterPatch after_patch = AfterPatch::cheaper;
  bool spread = false;
  uint32_t depth() const;
  // Some shard type is hosted by two groups or more: a loss of one of them can be patched.
  bool redundant() const;
  bool operator==(const ShardStacks&) const = default;
};

// Checks a stacks proposal. `types` is the number of shard types (== groups in SPARe); messages
// count groups and types from `base`, as check_schedule's. A proposal that spreads is wiped out only
// when no group is alive (a type no group up hosts is spread with the dropped groups' types).
Status check_stacks(const ShardStacks& s, uint32_t types, uint32_t base = 0);

}  // namespace sal::plan
