// groups.h — a worker's data-parallel group (parallel.groups; DESIGN "Parallel shape"). A grouped
// plan splits its positions into G groups, each a whole model over its own positions, and the
// global batch of a step into G shard types (type t: batch_share(global, G, t) of the sequences —
// still a pure function of (seed, step)). The shard stacks say which types each group computes this
// step; a group computes them one at a time, its ranks splitting each type's sequences, and its
// tokens go only to its own experts' replicas (dispatch stays inside the group: its own data plane).
// The gradients of every type then meet in one synchronisation over every rank of the plan (the
// non-expert units over all ranks, each expert over its holders in every group), so every group
// applies the same update: the sum over the whole global batch, each type computed exactly once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "runtime/dispatch.h"

namespace sal::runtime {

struct GroupRole {
  uint32_t groups = 1;           // G (= shard types)
  plan::GroupSpan span;          // this rank's group
  int local_rank = 0;            // this rank's place in its group
  std::vector<uint32_t> types;   // the shard types the group computes this step, in stack order
  std::vector<Counts> replicas;  // [layer] R[expert][group rank]: the group's own replicas
};

// The replica table ([layer] R[expert][rank]) restricted to the plan positions `ranks`, in that
// order (a group's ranks, or a patch's).
std::vector<Counts> replicas_at(const std::vector<Counts>& replicas, const std::vector<uint32_t>& ranks);

// This rank's role in `p` given the plan's replica table ([layer] R[expert][rank]).
GroupRole group_role(const plan::Plan& p, const std::vector<Counts>& replicas, int rank);

// The sequences [first, first + count) of the global batch that shard type `t` of `types` covers.
std::pair<int, int> type_sequences(int global_batch, uint32_t types, uint32_t t);
// This rank's part of them (its group's ranks split them as batch_share does).
std::pair<int, int> rank_sequences(int global_batch, const GroupRole& role, uint32_t t);

}  // namespace sal::runtime
