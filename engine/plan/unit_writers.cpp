// unit_writers.cpp — see unit_writers.h.
#include "plan/unit_writers.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace sal::plan {
namespace {

// The `copies` ranks of `eligible` writing the fewest bytes so far (ties: the lower rank), ascending;
// their bytes grow by `bytes`.
std::vector<uint32_t> take_least(std::vector<uint32_t> eligible, size_t copies, uint64_t bytes,
                                 std::vector<uint64_t>& load) {
  const size_t n = std::min(copies, eligible.size());
  std::partial_sort(eligible.begin(), eligible.begin() + long(n), eligible.end(),
                    [&](uint32_t a, uint32_t b) { return std::pair(load[a], a) < std::pair(load[b], b); });
  eligible.resize(n);
  std::sort(eligible.begin(), eligible.end());
  for (uint32_t r : eligible) load[r] += bytes;
  return eligible;
}

}  // namespace

ExpertHolders expert_holders(const Plan& plan) {
  ExpertHolders out;
  for (const LayerPlan& layer : plan.layers) {
    auto nodes = expert_nodes(layer, plan.experts);
    for (auto& h : nodes) {
      std::sort(h.begin(), h.end());
      h.erase(std::unique(h.begin(), h.end()), h.end());
    }
    out.push_back(std::move(nodes));
  }
  return out;
}

UnitWriters unit_writers(const ExpertHolders& holders, const WriteRequest& request) {
  auto here = [&](uint32_t r) {
    return r < request.ranks && std::find(request.absent.begin(), request.absent.end(), r) == request.absent.end();
  };
  UnitWriters w;
  w.bytes.assign(request.ranks, 0);
  // experts, the fewest holders first (they have the least choice)
  std::vector<std::tuple<size_t, size_t, size_t>> order;  // (holders here, layer, expert)
  w.experts.resize(holders.size());
  for (size_t l = 0; l < holders.size(); ++l) {
    w.experts[l].resize(holders[l].size());
    for (size_t e = 0; e < holders[l].size(); ++e)
      order.emplace_back(size_t(std::count_if(holders[l][e].begin(), holders[l][e].end(), here)), l, e);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [count, l, e] : order) {
    std::vector<uint32_t> eligible;
    for (uint32_t r : holders[l][e])
      if (here(r)) eligible.push_back(r);
    w.experts[l][e] = take_least(std::move(eligible), request.copies, request.expert_bytes, w.bytes);
  }
  // the non-expert units, the largest first, on the ranks writing the least
  std::vector<uint32_t> everyone;
  for (uint32_t r = 0; r < request.ranks; ++r)
    if (here(r)) everyone.push_back(r);
  std::vector<size_t> by_size(request.dense_bytes.size());
  std::iota(by_size.begin(), by_size.end(), size_t(0));
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return request.dense_bytes[a] > request.dense_bytes[b]; });
  w.dense.resize(request.dense_bytes.size());
  for (size_t i : by_size) w.dense[i] = take_least(everyone, request.copies, request.dense_bytes[i], w.bytes);
  return w;
}

std::vector<std::pair<int, int>> experts_written(const Plan& plan, uint32_t rank, const std::vector<uint32_t>& absent) {
  const ExpertHolders holders = expert_holders(plan);
  uint32_t ranks = 0;
  for (const LayerPlan& layer : plan.layers) ranks = std::max(ranks, uint32_t(layer.placement.size()));
  const UnitWriters w = unit_writers(holders, WriteRequest{ranks, 1, absent, 1, {}});
  std::vector<std::pair<int, int>> out;
  for (size_t l = 0; l < w.experts.size(); ++l)
    for (size_t e = 0; e < w.experts[l].size(); ++e)
      if (std::binary_search(w.experts[l][e].begin(), w.experts[l][e].end(), rank)) out.push_back({int(l), int(e)});
  return out;
}

}  // namespace sal::plan
