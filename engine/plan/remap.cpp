// remap.cpp — see remap.h.
#include "plan/remap.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace sal::plan {
namespace {

// (expert, copies) of one node's or position's slots in a layer.
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

// Nodes (or positions) that hold the same experts in every layer form a class: the overlap of a
// position with a node depends only on their classes. Blocks of popular experts make thousands of
// nodes share a few hundred classes, where pairs of nodes and positions sharing replicas number a
// million (1024 nodes, Zipf loads: bench_policy).
struct Classes {
  std::vector<std::vector<uint32_t>> members;  // class -> its nodes (positions), ascending
  std::vector<uint32_t> of;                    // node (position) -> class; kNone: none (a dead node)
  static constexpr uint32_t kNone = UINT32_MAX;
};

// contents(i, layer): the i-th member's slots in that layer; `in[i]` false leaves i out.
template <class Contents>
Classes classes_of(size_t count, size_t layers, const std::vector<bool>& in, Contents contents) {
  std::map<std::vector<std::vector<ExpertId>>, uint32_t> index;
  Classes c;
  c.of.assign(count, Classes::kNone);
  for (uint32_t i = 0; i < count; ++i) {
    if (!in[i]) continue;
    std::vector<std::vector<ExpertId>> key(layers);
    for (size_t l = 0; l < layers; ++l) {
      key[l] = contents(i, l);
      std::sort(key[l].begin(), key[l].end());
    }
    auto [it, fresh] = index.emplace(std::move(key), uint32_t(c.members.size()));
    if (fresh) c.members.emplace_back();
    c.members[it->second].push_back(i);
    c.of[i] = it->second;
  }
  return c;
}

// by_score[position class][s]: the node classes whose overlap with it is s (all layers counted), for
// s >= 1, counted from the node classes holding each expert (class, copies on each member).
std::vector<std::vector<std::vector<uint32_t>>> class_overlaps(const Holdings& held, const Classes& nodes,
                                                                const Plan& plan, const Classes& positions) {
  const size_t layers = plan.layers.size();
  std::vector<std::vector<std::vector<std::pair<uint32_t, uint32_t>>>> owners(
      layers, std::vector<std::vector<std::pair<uint32_t, uint32_t>>>(plan.experts));
  for (uint32_t c = 0; c < nodes.members.size(); ++c) {
    const auto& mine = held[nodes.members[c][0]];
    for (size_t l = 0; l < std::min(layers, mine.size()); ++l)
      for (auto [e, copies] : counted(mine[l]))
        if (e < plan.experts) owners[l][e].push_back({c, copies});
  }
  std::vector<std::vector<std::vector<uint32_t>>> by_score(positions.members.size());
  std::vector<uint32_t> score(nodes.members.size(), 0), touched;
  for (uint32_t pc = 0; pc < positions.members.size(); ++pc) {
    const uint32_t p = positions.members[pc][0];
    for (size_t l = 0; l < layers; ++l)
      for (auto [e, copies] : counted(plan.layers[l].placement[p]))
        for (auto [c, held_copies] : owners[l][e]) {
          if (score[c] == 0) touched.push_back(c);
          score[c] += std::min(copies, held_copies);
        }
    for (uint32_t c : touched) {
      if (score[c] >= by_score[pc].size()) by_score[pc].resize(score[c] + 1);
      by_score[pc][score[c]].push_back(c);
      score[c] = 0;
    }
    touched.clear();
  }
  return by_score;
}

// Gives positions to the nodes that already hold their replicas: largest overlap first; at each
// overlap the positions in order, each taking the lowest free node with that overlap that `fits` it,
// so the result is deterministic. Positions that share nothing with a free node are left (-1).
template <class Fits>
void assign_by_overlap(const Holdings& held, const std::vector<bool>& alive, const Plan& plan, Fits fits, Remap& r) {
  const size_t layers = plan.layers.size();
  const Classes nodes = classes_of(held.size(), layers, alive, [&](uint32_t n, size_t l) {
    return l < held[n].size() ? held[n][l] : std::vector<ExpertId>{};
  });
  const Classes positions = classes_of(plan.nodes, layers, std::vector<bool>(plan.nodes, true),
                                       [&](uint32_t p, size_t l) { return plan.layers[l].placement[p]; });
  const auto by_score = class_overlaps(held, nodes, plan, positions);
  size_t most = 0;
  for (const auto& scores : by_score) most = std::max(most, scores.size());
  // The lowest free node of class c that may take position p (each class's free nodes from a cursor:
  // a node once taken stays taken), or -1.
  std::vector<size_t> cursor(nodes.members.size(), 0);
  auto first_free = [&](uint32_t c, uint32_t p) -> int64_t {
    const auto& m = nodes.members[c];
    while (cursor[c] < m.size() && r.position_of_node[m[cursor[c]]] >= 0) ++cursor[c];
    for (size_t i = cursor[c]; i < m.size(); ++i)
      if (r.position_of_node[m[i]] < 0 && fits(p, m[i])) return m[i];
    return -1;
  };
  for (size_t score = most; score-- > 1;)
    for (uint32_t p = 0; p < plan.nodes; ++p) {
      const auto& scores = by_score[positions.of[p]];
      if (r.node_of_position[p] >= 0 || score >= scores.size()) continue;
      int64_t best = -1;
      for (uint32_t c : scores[score])
        if (int64_t n = first_free(c, p); n >= 0 && (best < 0 || n < best)) best = n;
      if (best < 0) continue;
      r.node_of_position[p] = int32_t(best);
      r.position_of_node[size_t(best)] = int32_t(p);
      r.kept += score;
    }
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
  assign_by_overlap(held, alive, plan, fits, r);
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
