// expert_grads.cpp — see expert_grads.h.
#include "runtime/expert_grads.h"

#include <algorithm>

namespace sal::runtime {

std::vector<SharedExpert> shared_experts(const std::vector<Counts>& replicas) {
  std::vector<SharedExpert> out;
  for (size_t l = 0; l < replicas.size(); ++l)
    for (size_t e = 0; e < replicas[l].size(); ++e) {
      SharedExpert s{int(l), int(e), {}, 0};
      for (size_t r = 0; r < replicas[l][e].size(); ++r)
        if (replicas[l][e][r] > 0) s.holders.push_back(int(r));
      if (s.holders.size() < 2) continue;
      s.root = s.holders[out.size() % s.holders.size()];
      out.push_back(std::move(s));
    }
  return out;
}

namespace {

bool holds(const SharedExpert& s, int rank) {
  return std::binary_search(s.holders.begin(), s.holders.end(), rank);
}

std::string expert_name(const SharedExpert& s) {
  return "layer" + std::to_string(s.layer) + ".expert" + std::to_string(s.expert);
}

// Round 1: every non-root holder sends its gradient to the root, which keeps one buffer per other
// holder (inbox[i][k] for shared[i]'s k-th holder, empty for itself).
Status gather_to_roots(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                       const std::vector<model::Unit*>& mine, std::vector<std::vector<std::vector<float>>>& inbox) {
  std::vector<comm::SendSpec> sends;
  std::vector<comm::RecvSpec> recvs;
  inbox.assign(shared.size(), {});
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedExpert& s = shared[i];
    if (!mine[i]) continue;
    const size_t bytes = mine[i]->g.size() * sizeof(float);
    if (s.root != me) {
      sends.push_back({s.root, mine[i]->g.data(), bytes, uint32_t(i)});
      continue;
    }
    inbox[i].resize(s.holders.size());
    for (size_t k = 0; k < s.holders.size(); ++k) {
      if (s.holders[k] == me) continue;
      inbox[i][k].resize(mine[i]->g.size());
      recvs.push_back({s.holders[k], inbox[i][k].data(), bytes, uint32_t(i)});
    }
  }
  if (sends.empty() && recvs.empty()) return {};
  return comm.exchange(sends, recvs);
}

// The root's sum, holders in ascending rank order (its own gradient in its place).
void sum_at_root(int me, const SharedExpert& s, model::Unit& u, const std::vector<std::vector<float>>& parts) {
  std::vector<float> sum(u.g.size(), 0.0f);
  for (size_t k = 0; k < s.holders.size(); ++k) {
    const std::vector<float>& g = s.holders[k] == me ? u.g : parts[k];
    for (size_t j = 0; j < sum.size(); ++j) sum[j] += g[j];
  }
  u.g = std::move(sum);
}

// Round 2: every root sends its sum to the other holders, which overwrite their gradient with it.
Status scatter_from_roots(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                          const std::vector<model::Unit*>& mine) {
  std::vector<comm::SendSpec> sends;
  std::vector<comm::RecvSpec> recvs;
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedExpert& s = shared[i];
    if (!mine[i]) continue;
    const size_t bytes = mine[i]->g.size() * sizeof(float);
    if (s.root != me) {
      recvs.push_back({s.root, mine[i]->g.data(), bytes, uint32_t(i)});
      continue;
    }
    for (int h : s.holders)
      if (h != me) sends.push_back({h, mine[i]->g.data(), bytes, uint32_t(i)});
  }
  if (sends.empty() && recvs.empty()) return {};
  return comm.exchange(sends, recvs);
}

}  // namespace

Status reduce_among_holders(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                            model::Params& params) {
  std::vector<model::Unit*> mine(shared.size(), nullptr);
  for (size_t i = 0; i < shared.size(); ++i) {
    if (!holds(shared[i], me)) continue;
    mine[i] = params.expert(shared[i].layer, shared[i].expert);
    if (!mine[i]) return fail("rank ", me, " is a holder of ", expert_name(shared[i]), " but does not hold it");
  }
  std::vector<std::vector<std::vector<float>>> inbox;
  if (auto s = gather_to_roots(comm, me, shared, mine, inbox); !s)
    return s.error().with_context("expert gradients to their roots");
  for (size_t i = 0; i < shared.size(); ++i)
    if (mine[i] && shared[i].root == me) sum_at_root(me, shared[i], *mine[i], inbox[i]);
  if (auto s = scatter_from_roots(comm, me, shared, mine); !s)
    return s.error().with_context("expert gradient sums from their roots");
  return {};
}

}  // namespace sal::runtime
