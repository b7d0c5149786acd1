// groups.cpp — see groups.h.
#include "runtime/groups.h"

#include <algorithm>

#include "model/data.h"

namespace sal::runtime {

std::vector<Counts> replicas_at(const std::vector<Counts>& replicas, const std::vector<uint32_t>& ranks) {
  std::vector<Counts> out;
  for (const Counts& layer : replicas) {
    Counts t(layer.size());
    for (size_t e = 0; e < layer.size(); ++e)
      for (uint32_t r : ranks) t[e].push_back(r < layer[e].size() ? layer[e][r] : 0);
    out.push_back(std::move(t));
  }
  return out;
}

bool uneven_types(const plan::Plan& p) {
  const uint32_t groups = plan::group_count(p);
  if (groups <= 1) return false;
  uint64_t types = 0, ranks = 0;  // a group with ranks, compared with the first such: types x ranks across
  for (uint32_t g = 0; g < groups; ++g) {
    const uint64_t n = plan::group_span(p, g).count;
    if (n == 0) continue;
    const uint64_t t = g < p.stacks.assignment.size() ? p.stacks.assignment[g].size() : 0;
    if (ranks == 0) types = t, ranks = n;
    if (t * ranks != types * n) return true;
  }
  return false;
}

GroupRole group_role(const plan::Plan& p, const std::vector<Counts>& replicas, int rank) {
  GroupRole r;
  r.groups = plan::group_count(p);
  r.span = plan::group_of(p, uint32_t(rank));
  r.local_rank = rank - int(r.span.first);
  for (uint32_t g = 0; g < r.groups; ++g) r.sizes.push_back(plan::group_span(p, g).count);
  r.even = uneven_types(p);
  if (r.span.group < p.stacks.assignment.size()) r.types = p.stacks.assignment[r.span.group];
  if (p.groups.empty() && r.types.empty()) r.types = {0};  // one group computes the one type
  std::vector<uint32_t> positions(r.span.count);
  for (uint32_t i = 0; i < r.span.count; ++i) positions[i] = r.span.first + i;
  r.replicas = replicas_at(replicas, positions);
  return r;
}

std::pair<int, int> type_sequences(int global_batch, uint32_t types, uint32_t t) {
  return model::batch_share(global_batch, int(types), int(t));
}

std::pair<int, int> rank_part(std::pair<int, int> group_part, const GroupRole& role) {
  auto [sub, n] = model::batch_share(group_part.second, int(role.span.count), role.local_rank);
  return {group_part.first + sub, n};
}

std::pair<int, int> rank_sequences(int global_batch, const GroupRole& role, uint32_t t) {
  return rank_part(type_sequences(global_batch, role.groups, t), role);
}

namespace {

// The ranks of the groups not in `damaged`, and how many of them come before this rank's group's
// (-1: its group is damaged).
std::pair<int, int> ranks_up(const GroupRole& role, const std::vector<uint32_t>& damaged) {
  int ranks = 0, before = -1;
  for (uint32_t g = 0; g < role.groups; ++g) {
    if (std::find(damaged.begin(), damaged.end(), g) != damaged.end()) continue;
    if (g == role.span.group) before = ranks;
    ranks += int(g < role.sizes.size() ? role.sizes[g] : 1);
  }
  return {ranks, before};
}

}  // namespace

std::pair<int, int> groups_up_part(int total, const GroupRole& role, const std::vector<uint32_t>& damaged) {
  auto [ranks, before] = ranks_up(role, damaged);
  if (before < 0) return {0, 0};
  const int first = model::batch_share(total, ranks, before).first;
  auto [last, n] = model::batch_share(total, ranks, before + int(role.span.count) - 1);
  return {first, last + n - first};
}

std::pair<int, int> even_part(int global_batch, const GroupRole& role, const std::vector<uint32_t>& damaged) {
  if (global_batch < ranks_up(role, damaged).first) return {0, 0};
  return groups_up_part(global_batch, role, damaged);
}

GroupRole rejoined_role(const GroupRole& role, const std::vector<Counts>& replicas, const std::vector<uint32_t>& rejoin,
                        const std::vector<uint32_t>& left, int rank) {
  GroupRole r = role;
  uint32_t first = 0;  // group g's first plan position
  for (uint32_t g = 0; g < role.groups && g < role.sizes.size(); first += role.sizes[g], ++g) {
    if (std::find(rejoin.begin(), rejoin.end(), g) == rejoin.end()) continue;
    std::vector<uint32_t> up;
    for (uint32_t pos : left)
      if (pos >= first && pos < first + role.sizes[g]) up.push_back(pos);
    r.sizes[g] = uint32_t(up.size());
    auto me = std::find(up.begin(), up.end(), uint32_t(rank));
    if (me == up.end()) continue;
    r.span = {g, up.front(), uint32_t(up.size())};
    r.local_rank = int(me - up.begin());
    r.replicas = replicas_at(replicas, up);
  }
  return r;
}

std::pair<int, int> spread_part(int global_batch, const GroupRole& role, uint32_t t,
                                const std::vector<uint32_t>& damaged) {
  auto [first, count] = type_sequences(global_batch, role.groups, t);
  std::vector<uint32_t> up;  // the groups up, in order, while each still leaves its ranks a sequence
  int widest = 1;
  for (uint32_t g = 0; g < role.groups; ++g) {
    if (std::find(damaged.begin(), damaged.end(), g) != damaged.end()) continue;
    const int w = std::max(widest, int(g < role.sizes.size() ? role.sizes[g] : 1));
    if (!up.empty() && count < w * int(up.size() + 1)) break;
    up.push_back(g), widest = w;
  }
  auto at = std::find(up.begin(), up.end(), role.span.group);
  if (at == up.end()) return {first, 0};
  auto [part, n] = model::batch_share(count, int(up.size()), int(at - up.begin()));
  return {first + part, n};
}

}  // namespace sal::runtime
