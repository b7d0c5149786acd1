// groups.cpp — see groups.h.
#include "runtime/groups.h"

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

GroupRole group_role(const plan::Plan& p, const std::vector<Counts>& replicas, int rank) {
  GroupRole r;
  r.groups = plan::group_count(p);
  r.span = plan::group_of(p, uint32_t(rank));
  r.local_rank = rank - int(r.span.first);
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

std::pair<int, int> rank_sequences(int global_batch, const GroupRole& role, uint32_t t) {
  auto [first, count] = type_sequences(global_batch, role.groups, t);
  auto [sub, n] = model::batch_share(count, int(role.span.count), role.local_rank);
  return {first + sub, n};
}

}  // namespace sal::runtime
