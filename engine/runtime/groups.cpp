// groups.cpp — see groups.h.
#include "runtime/groups.h"

#include "model/data.h"

namespace sal::runtime {

GroupRole group_role(const plan::Plan& p, const std::vector<Counts>& replicas, int rank) {
  GroupRole r;
  r.groups = plan::group_count(p);
  r.span = plan::group_of(p, uint32_t(rank));
  r.local_rank = rank - int(r.span.first);
  if (r.span.group < p.stacks.assignment.size()) r.types = p.stacks.assignment[r.span.group];
  if (p.groups.empty() && r.types.empty()) r.types = {0};  // one group computes the one type
  for (const Counts& layer : replicas) {
    Counts mine(layer.size());
    for (size_t e = 0; e < layer.size(); ++e)
      for (uint32_t pos = r.span.first; pos < r.span.first + r.span.count && pos < layer[e].size(); ++pos)
        mine[e].push_back(layer[e][pos]);
    r.replicas.push_back(std::move(mine));
  }
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
