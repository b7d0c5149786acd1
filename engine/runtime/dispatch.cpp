// dispatch.cpp — see dispatch.h.
#include "runtime/dispatch.h"

#include <algorithm>

#include "core/expert_split.h"

namespace sal::runtime {
namespace {

// Fills send[j][i] for one expert: local first, then surplus to spare in worker order.
void route_expert(const std::vector<uint32_t>& tokens, const std::vector<uint32_t>& quota,
                  std::vector<std::vector<uint32_t>>& send) {
  size_t w = tokens.size();
  std::vector<uint32_t> surplus(w), spare(w);
  for (size_t j = 0; j < w; ++j) {
    uint32_t keep = std::min(tokens[j], quota[j]);
    send[j][j] = keep;
    surplus[j] = tokens[j] - keep;
    spare[j] = quota[j] - keep;
  }
  size_t sink = 0;
  for (size_t src = 0; src < w; ++src) {
    while (surplus[src] > 0) {
      while (spare[sink] == 0) ++sink;  // total spare == total surplus, so a sink exists
      uint32_t n = std::min(surplus[src], spare[sink]);
      send[src][sink] += n;
      surplus[src] -= n;
      spare[sink] -= n;
    }
  }
}

}  // namespace

uint64_t DispatchSchedule::total(int from, int to) const {
  uint64_t n = 0;
  for (int e = 0; e < experts; ++e) n += sent(e, from, to);
  return n;
}

Result<DispatchSchedule> flexible_dispatch(const Counts& tokens, const Counts& units, const std::vector<uint32_t>& weights,
                                           Split split) {
  if (tokens.size() != units.size())
    return fail("token counts for ", tokens.size(), " experts but replicas for ", units.size());
  const bool weighted = !weights.empty();
  DispatchSchedule s;
  s.experts = int(tokens.size());
  s.workers = tokens.empty() ? 0 : int(tokens[0].size());
  if (weighted && weights.size() != size_t(s.workers))
    return fail("weights for ", weights.size(), " workers, expected ", s.workers);
  std::vector<uint64_t> totals;
  for (size_t e = 0; e < tokens.size(); ++e) {
    if (tokens[e].size() != size_t(s.workers) || units[e].size() != size_t(s.workers))
      return fail("expert ", e, ": counts for ", tokens[e].size(), " and ", units[e].size(), " workers, expected ", s.workers);
    uint64_t total = 0, r = 0, capacity = 0;  // weighted: a replica on a worker of weight 0 takes nothing
    for (size_t j = 0; j < tokens[e].size(); ++j) {
      total += tokens[e][j];
      r += units[e][j];
      capacity += uint64_t(units[e][j]) * (weighted ? weights[j] : 1);
    }
    if (total > 0 && r == 0) return fail("expert ", e, " has ", total, " tokens but no replica");
    if (total > 0 && capacity == 0) return fail("expert ", e, " has ", total, " tokens but every replica has weight 0");
    totals.push_back(total);
  }
  s.quota = split == Split::counts ? balanced_split(totals, units, weights) : even_split(totals, units, weights);
  s.tokens = tokens;
  for (size_t e = 0; e < tokens.size(); ++e) {
    s.send.emplace_back(size_t(s.workers), std::vector<uint32_t>(size_t(s.workers), 0));
    if (totals[e] > 0) route_expert(tokens[e], s.quota[e], s.send.back());
  }
  return s;
}

uint64_t replicas_digest(const Counts& units, const std::vector<uint32_t>& weights, Split split, bool shadows) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 1099511628211ull;
  };
  mix(units.size());
  for (const auto& row : units) {
    mix(row.size());
    for (uint32_t u : row) mix(u);
  }
  if (!weights.empty()) {  // an unweighted table digests as it did before weights existed
    mix(weights.size());
    for (uint32_t w : weights) mix(w);
  }
  if (split != Split::even) mix(0x5B17 + uint64_t(split));  // likewise an even split
  if (shadows) mix(0x5AD0);  // and no shadows
  return h == 0 ? 1 : h;
}

Result<DispatchSchedule> gather_schedule(comm::Collectives& comm, const std::vector<uint32_t>& counts,
                                         const Counts& units, const std::vector<uint32_t>& weights, Split split,
                                         bool shadows) {
  const size_t E = counts.size(), W = size_t(comm.size());
  if (units.size() != E) return fail("token counts for ", E, " experts but replicas for ", units.size());
  // each rank's record: its counts, then the table's digest as two uint32
  const uint64_t digest = replicas_digest(units, weights, split, shadows);
  std::vector<uint32_t> mine(counts);
  mine.push_back(uint32_t(digest));
  mine.push_back(uint32_t(digest >> 32));
  const size_t R = mine.size();
  std::vector<uint32_t> all(R * W);
  if (auto s = comm.allgather(mine.data(), R * sizeof(uint32_t), all.data()); !s)
    return s.error().with_context("all-gather of the expert counts");
  for (size_t j = 0; j < W; ++j)
    if (all[j * R + E] != mine[E] || all[j * R + E + 1] != mine[E + 1])
      return fail("rank ", j, " dispatches with another replica table, other weights, another split or other shadowing "
                  "than rank ", comm.rank(), " (digest mismatch): the ranks disagree on the plan, the step's shares, "
                  "train.dispatch or train.shadow_experts");
  Counts tokens(E, std::vector<uint32_t>(W));
  for (size_t j = 0; j < W; ++j)
    for (size_t e = 0; e < E; ++e) tokens[e][j] = all[j * R + e];
  return flexible_dispatch(tokens, units, weights, split);
}

}  // namespace sal::runtime
