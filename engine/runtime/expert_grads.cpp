// expert_grads.cpp — see expert_grads.h.
#include "runtime/expert_grads.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "model/optimizer.h"

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

// out = +0 + parts[0] + parts[1] + ... element by element, in that order, a block at a time (so
// `out` may be one of the parts: a block is read whole before it is written).
void sum_in_order(const std::vector<const float*>& parts, size_t n, float* out) {
  constexpr size_t kBlock = 1024;
  float acc[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t len = std::min(kBlock, n - at);
    std::fill(acc, acc + len, 0.0f);
    for (const float* p : parts)
      for (size_t j = 0; j < len; ++j) acc[j] += p[at + j];
    std::copy(acc, acc + len, out + at);
  }
}

// Round 1: every non-root holder sends its gradient to the root, which receives each other
// holder's into its inbox (parts[i][k] for shared[i]'s k-th holder; its own is its gradient).
Status gather_to_roots(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared, HolderGradients& g,
                       std::vector<std::vector<const float*>>& parts) {
  std::vector<comm::SendSpec> sends;
  std::vector<comm::RecvSpec> recvs;
  parts.assign(shared.size(), {});
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedExpert& s = shared[i];
    if (!g.grads[i]) continue;
    const size_t bytes = g.sizes[i] * sizeof(float);
    if (s.root != me) {
      sends.push_back({s.root, g.grads[i], bytes, uint32_t(i)});
      continue;
    }
    parts[i].assign(s.holders.size(), g.grads[i]);
    for (size_t k = 0; k < s.holders.size(); ++k) {
      if (s.holders[k] == me) continue;
      auto box = g.inbox(i, k);
      if (!box) return box.error().with_context(expert_name(s));
      parts[i][k] = *box;
      recvs.push_back({s.holders[k], *box, bytes, uint32_t(i)});
    }
  }
  if (sends.empty() && recvs.empty()) return {};
  if (g.before_exchange) SAL_TRY(g.before_exchange());
  return comm.exchange(sends, recvs);
}

// Round 2: every root sends its sum to the other holders, which overwrite their gradient with it.
Status scatter_from_roots(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                          HolderGradients& g) {
  std::vector<comm::SendSpec> sends;
  std::vector<comm::RecvSpec> recvs;
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedExpert& s = shared[i];
    if (!g.grads[i]) continue;
    const size_t bytes = g.sizes[i] * sizeof(float);
    if (s.root != me) {
      recvs.push_back({s.root, g.grads[i], bytes, uint32_t(i)});
      continue;
    }
    for (int h : s.holders)
      if (h != me) sends.push_back({h, g.grads[i], bytes, uint32_t(i)});
  }
  if (sends.empty() && recvs.empty()) return {};
  if (g.before_exchange) SAL_TRY(g.before_exchange());
  return comm.exchange(sends, recvs);
}

}  // namespace

Status reduce_among_holders(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                            HolderGradients& g) {
  if (g.grads.size() != shared.size() || g.sizes.size() != shared.size())
    return fail("reduce_among_holders: ", g.grads.size(), " gradients and ", g.sizes.size(), " sizes for ",
                shared.size(), " shared experts");
  for (size_t i = 0; i < shared.size(); ++i)
    if (holds(shared[i], me) != (g.grads[i] != nullptr))
      return fail("rank ", me, holds(shared[i], me) ? " is a holder of " : " is not a holder of ",
                  expert_name(shared[i]), holds(shared[i], me) ? " but does not hold it" : " but holds it");
  std::vector<std::vector<const float*>> parts;
  if (auto s = gather_to_roots(comm, me, shared, g, parts); !s)
    return s.error().with_context("expert gradients to their roots");
  for (size_t i = 0; i < shared.size(); ++i)
    if (g.grads[i] && shared[i].root == me)
      if (auto s = g.sum(i, parts[i]); !s) return s.error().with_context("summing " + expert_name(shared[i]));
  if (auto s = scatter_from_roots(comm, me, shared, g); !s)
    return s.error().with_context("expert gradient sums from their roots");
  return {};
}

Status sum_dense_gradients(comm::Collectives& comm, model::Params& params) {
  const std::vector<model::Unit*> dense = params.non_expert_units();
  std::vector<float> buf;
  for (const model::Unit* u : dense) buf.insert(buf.end(), u->g.begin(), u->g.end());
  SAL_TRY(comm.allreduce_sum(buf.data(), buf.size()));
  size_t at = 0;
  for (model::Unit* u : dense) {
    std::copy(buf.begin() + long(at), buf.begin() + long(at + u->g.size()), u->g.begin());
    at += u->g.size();
  }
  return {};
}

// Host Params: the root's inbox is a vector per other holder, its sum a new vector.
Status reduce_among_holders(comm::Collectives& comm, int me, const std::vector<SharedExpert>& shared,
                            model::Params& params) {
  HolderGradients g;
  g.grads.assign(shared.size(), nullptr);
  g.sizes.assign(shared.size(), 0);
  for (size_t i = 0; i < shared.size(); ++i) {
    if (!holds(shared[i], me)) continue;
    model::Unit* u = params.expert(shared[i].layer, shared[i].expert);
    if (!u) return fail("rank ", me, " is a holder of ", expert_name(shared[i]), " but does not hold it");
    g.grads[i] = u->g.data();
    g.sizes[i] = u->g.size();
  }
  // the inboxes are written whole by the exchange before they are read: no zero-filling
  std::vector<std::vector<std::unique_ptr<float[]>>> inbox(shared.size());
  g.inbox = [&](size_t i, size_t k) -> Result<float*> {
    inbox[i].resize(shared[i].holders.size());
    inbox[i][k].reset(new float[g.sizes[i]]);
    return inbox[i][k].get();
  };
  g.sum = [&](size_t i, const std::vector<const float*>& parts) -> Status {
    sum_in_order(parts, g.sizes[i], g.grads[i]);
    return {};
  };
  return reduce_among_holders(comm, me, shared, g);
}

Result<double> global_grad_norm(comm::Collectives& comm, const model::Params& params, const std::vector<Counts>& replicas) {
  double dense = model::grad_sum_squares(params.embedding);
  for (size_t l = 0; l < params.dense.size(); ++l)
    dense += model::grad_sum_squares(params.dense[l]) + model::grad_sum_squares(params.gate[l]);
  double experts = 0;
  for (const auto& [key, u] : params.experts) {
    const auto& holders = replicas[size_t(key.first)][size_t(key.second)];
    double h = double(std::count_if(holders.begin(), holders.end(), [](uint32_t x) { return x > 0; }));
    experts += model::grad_sum_squares(u) / std::max(h, 1.0);
  }
  if (comm.size() > 1) SAL_TRY(comm.allreduce_sum(&experts, 1));
  return std::sqrt(dense + experts);
}

}  // namespace sal::runtime
