// remap.cpp — see remap.h.
#include "plan/remap.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace sal::plan {
namespace {

// Multiset intersection size of two sorted expert lists.
uint32_t overlap(const std::vector<ExpertId>& a, const std::vector<ExpertId>& b) {
  uint32_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      ++n;
      ++i;
      ++j;
    } else if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

struct Candidate {
  uint32_t score;
  uint32_t position;
  uint32_t node;
};

using Sorted = std::vector<std::vector<std::vector<ExpertId>>>;  // [a][layer] -> sorted experts

Sorted sorted_holdings(const Holdings& held, size_t layers) {
  Sorted out(held.size(), std::vector<std::vector<ExpertId>>(layers));
  for (size_t n = 0; n < held.size(); ++n)
    for (size_t l = 0; l < std::min(layers, held[n].size()); ++l) {
      out[n][l] = held[n][l];
      std::sort(out[n][l].begin(), out[n][l].end());
    }
  return out;
}

Sorted sorted_positions(const Plan& plan) {
  Sorted out(plan.nodes, std::vector<std::vector<ExpertId>>(plan.layers.size()));
  for (uint32_t p = 0; p < plan.nodes; ++p)
    for (size_t l = 0; l < plan.layers.size(); ++l) {
      out[p][l] = plan.layers[l].placement[p];
      std::sort(out[p][l].begin(), out[p][l].end());
    }
  return out;
}

// Every (position, node) pair whose overlap is not zero, with the overlap (replicas of the
// position already on the node, all layers).
std::vector<Candidate> candidates(const Holdings& held, const std::vector<bool>& alive, const Plan& plan) {
  std::vector<Candidate> out;
  size_t layers = plan.layers.size();
  Sorted nodes = sorted_holdings(held, layers), positions = sorted_positions(plan);
  // owners[layer][expert] = nodes holding it
  std::vector<std::vector<std::vector<uint32_t>>> owners(layers, std::vector<std::vector<uint32_t>>(plan.experts));
  for (uint32_t n = 0; n < held.size(); ++n)
    for (size_t l = 0; alive[n] && l < std::min(layers, held[n].size()); ++l)
      for (ExpertId e : held[n][l])
        if (e < plan.experts && (owners[l][e].empty() || owners[l][e].back() != n)) owners[l][e].push_back(n);
  std::map<uint32_t, uint32_t> touched;  // node -> score, reused per position
  for (uint32_t p = 0; p < plan.nodes; ++p) {
    touched.clear();
    for (size_t l = 0; l < layers; ++l)
      for (ExpertId e : plan.layers[l].placement[p])
        for (uint32_t n : owners[l][e]) touched[n] = 0;
    for (auto& [n, score] : touched) {
      for (size_t l = 0; l < layers; ++l) score += overlap(nodes[n][l], positions[p][l]);
      out.push_back({score, p, n});
    }
  }
  return out;
}

}  // namespace

Result<Remap> greedy_remap(const Holdings& held, const std::vector<bool>& alive, const Plan& plan) {
  if (alive.size() != held.size()) return fail("alive has ", alive.size(), " entries for ", held.size(), " nodes");
  size_t live = size_t(std::count(alive.begin(), alive.end(), true));
  if (live < plan.nodes)
    return fail("the plan has ", plan.nodes, " positions but only ", live, " nodes are alive");
  Remap r;
  r.node_of_position.assign(plan.nodes, -1);
  r.position_of_node.assign(held.size(), -1);
  auto cand = candidates(held, alive, plan);
  // Largest overlap first; ties by position then node, so the result is deterministic.
  std::sort(cand.begin(), cand.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(b.score, a.position, a.node) < std::tie(a.score, b.position, b.node);
  });
  for (const auto& c : cand) {
    if (r.node_of_position[c.position] >= 0 || r.position_of_node[c.node] >= 0) continue;
    r.node_of_position[c.position] = int32_t(c.node);
    r.position_of_node[c.node] = int32_t(c.position);
    r.kept += c.score;
  }
  uint32_t next_free = 0;
  for (uint32_t p = 0; p < plan.nodes; ++p) {
    if (r.node_of_position[p] >= 0) continue;
    while (r.position_of_node[next_free] >= 0 || !alive[next_free]) ++next_free;
    r.node_of_position[p] = int32_t(next_free);
    r.position_of_node[next_free] = int32_t(p);
  }
  uint64_t total = 0;
  for (const auto& l : plan.layers)
    for (const auto& slots : l.placement) total += slots.size();
  r.fetched = total - r.kept;
  return r;
}

Result<std::vector<Transfer>> transfer_schedule(const Holdings& held, const std::vector<bool>& alive,
                                                const Plan& plan, const Remap& remap) {
  struct Need {
    uint32_t layer;
    ExpertId expert;
    uint32_t to;
    const std::vector<uint32_t>* owners;
  };
  std::vector<std::vector<std::vector<uint32_t>>> owners(plan.layers.size(),
                                                         std::vector<std::vector<uint32_t>>(plan.experts));
  std::vector<Need> needs;
  for (uint32_t l = 0; l < plan.layers.size(); ++l) {
    for (uint32_t n = 0; n < held.size(); ++n)
      for (ExpertId e : (alive[n] && l < held[n].size()) ? held[n][l] : std::vector<ExpertId>{})
        if (e < plan.experts && (owners[l][e].empty() || owners[l][e].back() != n)) owners[l][e].push_back(n);
    for (uint32_t p = 0; p < plan.nodes; ++p) {
      uint32_t to = uint32_t(remap.node_of_position[p]);
      std::vector<ExpertId> have = l < held[to].size() ? held[to][l] : std::vector<ExpertId>{};
      for (ExpertId e : plan.layers[l].placement[p]) {
        if (auto it = std::find(have.begin(), have.end(), e); it != have.end()) {
          have.erase(it);  // already here (one copy per slot)
          continue;
        }
        if (owners[l][e].empty())
          return fail("layer ", l, " expert ", e, " has no surviving replica: restore it from a checkpoint");
        needs.push_back({l, e, to, &owners[l][e]});
      }
    }
  }
  std::stable_sort(needs.begin(), needs.end(),
                   [](const Need& a, const Need& b) { return a.owners->size() < b.owners->size(); });
  std::vector<uint64_t> sends(held.size(), 0);
  std::vector<Transfer> out;
  out.reserve(needs.size());
  for (const auto& n : needs) {
    uint32_t from = *std::min_element(n.owners->begin(), n.owners->end(),
                                      [&](uint32_t a, uint32_t b) { return sends[a] < sends[b]; });
    ++sends[from];
    out.push_back({n.layer, n.expert, from, n.to});
  }
  return out;
}

}  // namespace sal::plan
