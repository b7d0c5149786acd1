// schedule.cpp — see schedule.h.
#include "plan/schedule.h"

#include <algorithm>
#include <cstdio>

namespace sal::plan {

Status check_schedule(const CheckpointSchedule& s, size_t operators, uint32_t base) {
  if (s.window == 0) return fail("window must be at least 1");
  if (s.period < s.window) return fail("period ", s.period, " is shorter than the window ", s.window);
  if (s.slots.size() != s.window)
    return fail("the schedule has ", s.slots.size(), " iterations for a window of ", s.window);
  std::vector<int> seen(operators, -1);
  for (uint32_t i = 0; i < s.slots.size(); ++i) {
    for (uint32_t op : s.slots[i]) {
      if (op >= operators) return fail("iteration ", i + base, " names operator ", op + base, " of ", operators);
      if (seen[op] >= 0)
        return fail("operator ", op + base, " is snapshotted twice (iterations ", seen[op] + int(base), " and ", i + base, ")");
      seen[op] = int(i);
    }
  }
  for (size_t op = 0; op < operators; ++op)
    if (seen[op] < 0) return fail("operator ", op + base, " is never snapshotted: the window must cover every operator once");
  return {};
}

double sparse_rerun_steps(const CheckpointSchedule& s) {
  return double(s.window) + (double(std::max(s.period, s.window)) - 1) / 2;
}

double dense_rerun_steps(int64_t dense_every) { return double(std::max<int64_t>(dense_every, 1) - 1) / 2; }

std::string sparse_not_taken(const CheckpointSchedule& s, int64_t dense_every, bool expert_logs) {
  if (expert_logs || dense_every <= 0) return "";
  const double sparse = sparse_rerun_steps(s), dense = dense_rerun_steps(dense_every);
  if (sparse < dense) return "";
  char text[256];
  std::snprintf(text, sizeof text,
                "a restore from its window of %u (period %u) would run %.1f steps again on average, from the "
                "dense snapshots every %lld steps %.1f",
                s.window, std::max(s.period, s.window), sparse, (long long)dense_every, dense);
  return text;
}

const char* after_patch_name(AfterPatch a) {
  switch (a) {
    case AfterPatch::cheaper: return "cheaper";
    case AfterPatch::degraded: return "degraded";
    case AfterPatch::regroup: return "regroup";
  }
  return "?";
}

bool ShardStacks::redundant() const {
  std::vector<int> hosted;
  for (const auto& h : hosts)
    for (uint32_t t : h) {
      if (t >= hosted.size()) hosted.resize(size_t(t) + 1, 0);
      if (++hosted[t] >= 2) return true;
    }
  return false;
}

uint32_t ShardStacks::depth() const {
  size_t d = 0;
  for (const auto& a : assignment) d = std::max(d, a.size());
  return uint32_t(d);
}

namespace {

// Spread (a patch splits the dropped groups' types over every group up): a type with no alive host
// is spread too, so a wipe-out is no group alive; a type with one is computed once, as without.
Status check_spread_wipeout(const ShardStacks& s, const std::vector<int>& hosted_alive,
                            const std::vector<int>& computed, uint32_t base) {
  const bool wiped = std::none_of(s.alive.begin(), s.alive.end(), [](bool b) { return b; });
  if (wiped != s.wipeout)
    return fail(wiped ? "no group is alive, but the proposal does not declare a wipe-out"
                      : "the proposal declares a wipe-out but it spreads and a group is alive");
  if (wiped) return {};
  for (size_t t = 0; t < computed.size(); ++t)
    if (computed[t] < 0 && hosted_alive[t] > 0)
      return fail("shard type ", t + base, " has an alive host but is computed by no group");
  return {};
}

}  // namespace

Status check_stacks(const ShardStacks& s, uint32_t types, uint32_t base) {
  size_t groups = s.hosts.size();
  if (s.alive.size() != groups || s.assignment.size() != groups)
    return fail("hosts, alive and assignment must have one entry per group (", groups, ")");
  std::vector<int> hosted_alive(types, 0), computed(types, -1);
  for (size_t g = 0; g < groups; ++g) {
    for (uint32_t t : s.hosts[g]) {
      if (t >= types) return fail("group ", g + base, " hosts shard type ", t + base, " of ", types);
      if (s.alive[g]) ++hosted_alive[t];
    }
    if (!s.alive[g] && !s.assignment[g].empty()) return fail("group ", g + base, " is dead but computes shards");
    for (uint32_t t : s.assignment[g]) {
      if (std::find(s.hosts[g].begin(), s.hosts[g].end(), t) == s.hosts[g].end())
        return fail("group ", g + base, " computes shard type ", t + base, " which it does not host");
      if (computed[t] >= 0)
        return fail("shard type ", t + base, " is computed twice (groups ", computed[t] + int(base), " and ", g + base, ")");
      computed[t] = int(g);
    }
  }
  if (s.spread) return check_spread_wipeout(s, hosted_alive, computed, base);
  bool wiped = std::find(hosted_alive.begin(), hosted_alive.end(), 0) != hosted_alive.end();
  if (wiped != s.wipeout)
    return fail(wiped ? "a shard type has no alive host, but the proposal does not declare a wipe-out"
                      : "the proposal declares a wipe-out but every shard type has an alive host");
  if (wiped) return {};
  for (uint32_t t = 0; t < types; ++t)
    if (computed[t] < 0) return fail("shard type ", t + base, " is computed by no group");
  return {};
}

}  // namespace sal::plan
