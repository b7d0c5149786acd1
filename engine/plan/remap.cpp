// remap.cpp — see remap.h.
#include "plan/remap.h"

#include <algorithm>

namespace sal::plan {
namespace {

// (node, copies of the expert on it)
using Owner = std::pair<uint32_t, uint32_t>;
// owners[layer][expert]: the alive nodes holding it and how many copies each holds.
using Owners = std::vector<std::vector<std::vector<Owner>>>;

Owners owners_of(const Holdings& held, const std::vector<bool>& alive, size_t layers, uint32_t experts) {
  Owners owners(layers, std::vector<std::vector<Owner>>(experts));
  for (uint32_t n = 0; n < held.size(); ++n) {
    if (!alive[n]) continue;
    for (size_t l = 0; l < std::min(layers, held[n].size()); ++l)
      for (ExpertId e : held[n][l]) {
        if (e >= experts) continue;
        auto& list = owners[l][e];
        if (!list.empty() && list.back().first == n) {
          ++list.back().second;
        } else {
          list.push_back({n, 1});
        }
      }
  }
  return owners;
}

// (expert, copies) of one position's slots in a layer.
std::vector<std::pair<ExpertId, uint32_t>> counted(std::vector<ExpertId> slots) {
  std::sort(slots.begin(), slots.end());
  std::vector<std::pair<ExpertId, uint32_t>> out;
  for (ExpertId e : slots) {
    if (!out.empty() && out.back().first == e) {
      ++out.back().second;
    } else {
      out.push_back({e, 1});
    }
  }
  return out;
}

// Every (position, node) pair whose overlap is not zero — the replicas of the position the node
// already holds, all layers — bucketed by overlap; within a bucket by position, then node.
// Counting from the owners of each position's experts touches only pairs that share something.
std::vector<std::vector<std::pair<uint32_t, uint32_t>>> candidates(const Holdings& held, const std::vector<bool>& alive,
                                                                   const Plan& plan) {
  size_t layers = plan.layers.size();
  Owners owners = owners_of(held, alive, layers, plan.experts);
  std::vector<uint32_t> score(held.size(), 0);
  std::vector<uint32_t> touched;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> buckets(size_t(plan.slots) * layers + 1);
  for (uint32_t p = 0; p < plan.nodes; ++p) {
    for (size_t l = 0; l < layers; ++l)
      for (auto [e, copies] : counted(plan.layers[l].placement[p]))
        for (auto [n, held_copies] : owners[l][e]) {
          if (score[n] == 0) touched.push_back(n);
          score[n] += std::min(copies, held_copies);
        }
    std::sort(touched.begin(), touched.end());
    for (uint32_t n : touched) {
      if (score[n] >= buckets.size()) buckets.resize(score[n] + 1);
      buckets[score[n]].push_back({p, n});
      score[n] = 0;
    }
    touched.clear();
  }
  return buckets;
}

}  // namespace

Result<Remap> greedy_remap(const Holdings& held, const std::vector<bool>& alive, const Plan& plan,
                           const std::vector<uint32_t>& domain_of_node) {
  if (alive.size() != held.size()) return fail("alive has ", alive.size(), " entries for ", held.size(), " nodes");
  size_t live = size_t(std::count(alive.begin(), alive.end(), true));
  if (live < plan.nodes)
    return fail("the plan has ", plan.nodes, " positions but only ", live, " nodes are alive");
  const bool by_domain = !plan.domains.empty();
  if (by_domain && domain_of_node.size() != held.size())
    return fail("the plan has failure domains but ", domain_of_node.size(), " of ", held.size(), " nodes have one");
  auto fits = [&](uint32_t position, uint32_t node) { return !by_domain || plan.domains[position] == domain_of_node[node]; };
  Remap r;
  r.node_of_position.assign(plan.nodes, -1);
  r.position_of_node.assign(held.size(), -1);
  auto buckets = candidates(held, alive, plan);
  // Largest overlap first; ties by position then node, so the result is deterministic.
  for (size_t score = buckets.size(); score-- > 1;)
    for (auto [position, node] : buckets[score]) {
      if (r.node_of_position[position] >= 0 || r.position_of_node[node] >= 0 || !fits(position, node)) continue;
      r.node_of_position[position] = int32_t(node);
      r.position_of_node[node] = int32_t(position);
      r.kept += score;
    }
  for (uint32_t p = 0; p < plan.nodes; ++p) {
    if (r.node_of_position[p] >= 0) continue;
    uint32_t n = 0;
    while (n < held.size() && (r.position_of_node[n] >= 0 || !alive[n] || !fits(p, n))) ++n;
    if (n == held.size())
      return by_domain ? fail("position ", p, " of failure domain ", plan.domains[p], " has no free node of that domain left")
                       : fail("position ", p, " has no free node left");
    r.node_of_position[p] = int32_t(n);
    r.position_of_node[n] = int32_t(p);
  }
  uint64_t total = 0;
  for (const auto& l : plan.layers)
    for (const auto& slots : l.placement) total += slots.size();
  r.fetched = total - r.kept;
  return r;
}

std::optional<Remap> ordered_remap(const Holdings& held, const std::vector<bool>& alive, const Plan& plan,
                                   const std::vector<uint32_t>& order, const std::vector<uint32_t>& domain_of_node) {
  if (order.size() != plan.nodes || alive.size() != held.size()) return std::nullopt;
  Remap r;
  r.node_of_position.assign(plan.nodes, -1);
  r.position_of_node.assign(held.size(), -1);
  uint64_t total = 0;
  for (uint32_t p = 0; p < plan.nodes; ++p) {
    const uint32_t n = order[p];
    if (n >= held.size() || !alive[n] || r.position_of_node[n] >= 0) return std::nullopt;
    if (!plan.domains.empty() && (n >= domain_of_node.size() || plan.domains[p] != domain_of_node[n])) return std::nullopt;
    r.node_of_position[p] = int32_t(n);
    r.position_of_node[n] = int32_t(p);
    for (size_t l = 0; l < plan.layers.size(); ++l) {
      total += plan.layers[l].placement[p].size();
      if (l >= held[n].size()) continue;
      for (auto [e, copies] : counted(plan.layers[l].placement[p]))
        r.kept += std::min<uint64_t>(copies, uint64_t(std::count(held[n][l].begin(), held[n][l].end(), e)));
    }
  }
  r.fetched = total - r.kept;
  return r;
}

Result<std::vector<Transfer>> transfer_schedule(const Holdings& held, const std::vector<bool>& alive,
                                                const Plan& plan, const Remap& remap,
                                                const std::set<LayerExpert>& rebuilt) {
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
        if (owners[l][e].empty() && rebuilt.count({l, e})) continue;
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

namespace {

// `next` as a plan: its replica counts from its slots. Fails on layers of other sizes, or an expert
// id not below its layer's slot count (every expert has a slot: this bounds what is allocated).
Result<Plan> plan_of(const LayerSlots& next) {
  Plan p;
  p.nodes = uint32_t(next[0].size());
  p.slots = p.nodes > 0 ? uint32_t(next[0][0].size()) : 0;
  for (size_t l = 0; l < next.size(); ++l) {
    if (next[l].size() != p.nodes)
      return fail("layer ", l + 1, " of the new placement has ", next[l].size(), " nodes, its first layer ", p.nodes);
    LayerPlan layer;
    layer.placement = next[l];
    size_t slots = 0;
    for (const auto& node : next[l]) slots += node.size();
    for (const auto& node : next[l])
      for (ExpertId e : node) {
        if (e >= slots) return fail("layer ", l + 1, " names expert ", e + 1, " in its ", slots, " slots");
        if (e >= layer.replicas.size()) layer.replicas.resize(size_t(e) + 1, 0);
        ++layer.replicas[e];
      }
    p.experts = std::max(p.experts, uint32_t(layer.replicas.size()));
    p.layers.push_back(std::move(layer));
  }
  for (auto& layer : p.layers) layer.replicas.resize(p.experts, 0);
  return p;
}

// The experts each position's node lacks, once each however many slots it fills.
Fetched experts_lacked(const Holdings& held, const Plan& p, const Remap& r) {
  Fetched f;
  for (uint32_t pos = 0; pos < p.nodes; ++pos) {
    const auto& had = held[size_t(r.node_of_position[pos])];
    uint64_t here = 0;
    for (size_t l = 0; l < p.layers.size(); ++l) {
      std::set<ExpertId> want(p.layers[l].placement[pos].begin(), p.layers[l].placement[pos].end());
      for (ExpertId e : want) here += std::find(had[l].begin(), had[l].end(), e) == had[l].end();
    }
    f.total += here;
    f.most = std::max(f.most, here);
  }
  return f;
}

}  // namespace

Result<Fetched> replicas_fetched(const LayerSlots& held, const LayerSlots& next) {
  if (held.size() != next.size() || next.empty())
    return fail("the placements have ", held.size(), " and ", next.size(), " layers");
  auto p = plan_of(next);
  if (!p) return p.error();
  for (size_t l = 0; l < held.size(); ++l)
    if (held[l].size() != p->nodes)
      return fail("layer ", l + 1, " of the placement held has ", held[l].size(), " nodes, the new one ", p->nodes);
  Holdings h(p->nodes);
  for (uint32_t n = 0; n < p->nodes; ++n)
    for (const auto& layer : held) h[n].push_back(layer[n]);
  auto r = greedy_remap(h, std::vector<bool>(p->nodes, true), *p);
  if (!r) return r.error();
  return experts_lacked(h, *p, *r);
}

}  // namespace sal::plan
