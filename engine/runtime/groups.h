// groups.h — a worker's data-parallel group (parallel.groups; DESIGN "Parallel shape"). A grouped
// plan splits its positions into G groups, each a whole model over its own positions, and the
// global batch of a step into G shard types (type t: batch_share(global, G, t) of the sequences —
// still a pure function of (seed, step)). The shard stacks say which types each group computes this
// step; a group computes them one at a time, its ranks splitting each type's sequences — unless
// whole types would give the groups unequal work a rank (uneven_types: groups of 2, 1, 2, 2 after a
// regroup), when each group computes its even part of the batch in one pass instead — and its
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
  std::vector<uint32_t> sizes;   // [group] its ranks (every group of the plan)
  bool even = false;             // the plan's steps compute even parts, not whole types (uneven_types)
  std::vector<Counts> replicas;  // [layer] R[expert][group rank]: the group's own replicas
};

// The replica table ([layer] R[expert][rank]) restricted to the plan positions `ranks`, in that
// order (a group's ranks, or a patch's).
std::vector<Counts> replicas_at(const std::vector<Counts>& replicas, const std::vector<uint32_t>& ranks);

// Whether whole shard types would give the plan's groups unequal work a rank: a group of one
// computing a type beside groups of two, or a group computing two types beside one computing one
// (a regroup over an odd number of workers leaves such plans). Their steps then compute each
// group's even part of the whole batch instead (even_part with none damaged), in one pass: the load
// a plan of equal groups gives each rank. False for a plan of one group.
bool uneven_types(const plan::Plan& p);

// This rank's role in `p` given the plan's replica table ([layer] R[expert][rank]).
GroupRole group_role(const plan::Plan& p, const std::vector<Counts>& replicas, int rank);

// The sequences [first, first + count) of the global batch that shard type `t` of `types` covers.
std::pair<int, int> type_sequences(int global_batch, uint32_t types, uint32_t t);
// This rank's part of them (its group's ranks split them as batch_share does).
std::pair<int, int> rank_sequences(int global_batch, const GroupRole& role, uint32_t t);

// A patch's spread type (wire::StepPatch.spread): shard type `t`'s sequences split over the groups
// not in `damaged`, in group order, into as many contiguous parts as leave every rank of those
// groups one sequence or more (at most one a group; at least one part, to the first group up):
// this rank's group's part, {first, 0} where it has none (or is damaged).
std::pair<int, int> spread_part(int global_batch, const GroupRole& role, uint32_t t,
                                const std::vector<uint32_t>& damaged);
// A degraded step under a spreading patch: the whole global batch over the groups not in `damaged`,
// in proportion to their ranks, each group's part contiguous (one pass, across shard types) — the
// load a regrouped plan would give them, without the re-plan. {first, 0} for a damaged group, and
// for every group where the batch has fewer sequences than those groups have ranks (then the
// groups compute their types and their parts of the spread ones, as in the patch).
std::pair<int, int> even_part(int global_batch, const GroupRole& role, const std::vector<uint32_t>& damaged);
// The arrangement of a spreading patch's degraded steps (wire::StepPatch.rejoin): `role` with each
// group of `rejoin` — damaged, its ranks left still holding every expert — resized to those ranks
// among `left` (plan positions, ascending); where this rank (`rank`) is one of them, its place
// among them and their replica table (from `replicas`, [layer] R[expert][rank]) as its group's.
// even_part over it, with the rejoined groups no longer damaged, covers the batch once.
GroupRole rejoined_role(const GroupRole& role, const std::vector<Counts>& replicas, const std::vector<uint32_t>& rejoin,
                        const std::vector<uint32_t>& left, int rank);
// The same split of `total` sequences (the validation set's) without the floor: a part may leave
// some ranks none, or be empty where `total` is below the ranks up. {0, 0} for a damaged group.
std::pair<int, int> groups_up_part(int total, const GroupRole& role, const std::vector<uint32_t>& damaged);
// This rank's share of its group's sequences [first, first + count).
std::pair<int, int> rank_part(std::pair<int, int> group_part, const GroupRole& role);

}  // namespace sal::runtime
