// plan_switch.cpp — see plan_switch.h.
#include "job/plan_switch.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/model_shape.h"
#include "plan/domains.h"
#include "plan/group_order.h"
#include "plan/remap.h"

namespace sal::job {
namespace {

constexpr uint8_t kEmbedding = uint8_t(UnitKind::embedding), kDense = uint8_t(UnitKind::dense),
                  kGate = uint8_t(UnitKind::gate), kExpert = uint8_t(UnitKind::expert);

struct Physical {
  std::vector<Participant> who;  // participants first (alive), then old ranks that are gone
  plan::Holdings held;
  std::vector<bool> alive;
  std::vector<bool> fresh;       // alive but not a rank of the current plan
};

Physical physical_nodes(const std::optional<AppliedPlan>& current, const std::vector<Participant>& participants,
                        size_t layers) {
  Physical p;
  auto old_rank = [&](const Participant& x) -> int {
    if (!current) return -1;
    auto it = std::find(current->ranks.begin(), current->ranks.end(), x);
    return it == current->ranks.end() ? -1 : int(it - current->ranks.begin());
  };
  auto holdings = [&](int rank) {
    std::vector<std::vector<plan::ExpertId>> h(layers);
    if (rank < 0) return h;
    for (size_t l = 0; l < std::min(layers, current->plan.layers.size()); ++l) h[l] = current->plan.layers[l].placement[size_t(rank)];
    return h;
  };
  for (const auto& x : participants) {
    int r = old_rank(x);
    p.who.push_back(x);
    p.held.push_back(holdings(r));
    p.alive.push_back(true);
    p.fresh.push_back(r < 0);
  }
  if (current)
    for (size_t r = 0; r < current->ranks.size(); ++r)
      if (std::find(participants.begin(), participants.end(), current->ranks[r]) == participants.end()) {
        p.who.push_back(current->ranks[r]);
        p.held.push_back(holdings(int(r)));
        p.alive.push_back(false);
        p.fresh.push_back(false);
      }
  return p;
}

bool holds(const plan::Holdings& held, uint32_t node, uint32_t layer, plan::ExpertId e) {
  const auto& h = held[node][layer];
  return std::find(h.begin(), h.end(), e) != h.end();
}

// Every non-expert unit to each fresh rank, from the surviving ranks in turn.
Status dense_transfers(const Physical& phys, const plan::Remap& remap, size_t layers, PlanSwitch& out) {
  std::vector<uint32_t> sources;
  for (uint32_t n = 0; n < phys.who.size(); ++n)
    if (phys.alive[n] && !phys.fresh[n] && remap.position_of_node[n] >= 0) sources.push_back(uint32_t(remap.position_of_node[n]));
  std::vector<std::tuple<uint8_t, int32_t>> units{{kEmbedding, -1}};
  for (int32_t l = 0; l < int32_t(layers); ++l) {
    units.push_back({kDense, l});
    units.push_back({kGate, l});
  }
  size_t turn = 0;
  for (uint32_t n = 0; n < phys.who.size(); ++n) {
    if (!phys.fresh[n] || remap.position_of_node[n] < 0) continue;
    if (sources.empty())
      return fail("no worker that holds the model's state is left (every rank of the current plan is gone); "
                  "only a checkpoint could restore it");
    for (auto [kind, layer] : units) {
      out.transfers.push_back({kind, layer, -1, sources[turn++ % sources.size()], uint32_t(remap.position_of_node[n])});
      ++out.dense_moved;
    }
  }
  return {};
}

// The participants' indices (as physical_nodes numbers them) with the plan in force's ranks first,
// in rank order, then the others as they come.
std::vector<uint32_t> ranks_first_order(const std::optional<AppliedPlan>& current, const std::vector<Participant>& participants) {
  std::vector<uint32_t> order(participants.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto rank_of = [&](uint32_t i) -> size_t {
    if (!current) return 0;
    auto it = std::find(current->ranks.begin(), current->ranks.end(), participants[i]);
    return size_t(it - current->ranks.begin());  // the others: ranks.size(), after every rank
  };
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return rank_of(a) < rank_of(b); });
  return order;
}

}  // namespace

std::vector<std::vector<std::vector<uint32_t>>> held_by(const std::optional<AppliedPlan>& current,
                                                        const std::vector<Participant>& workers) {
  std::vector<std::vector<std::vector<uint32_t>>> out;
  if (!current || plan::group_count(current->plan) > 1) return out;
  std::map<Participant, size_t> position;  // each rank's, looked up once per worker, not per layer
  for (size_t pos = 0; pos < current->ranks.size(); ++pos) position.emplace(current->ranks[pos], pos);
  for (const auto& layer : current->plan.layers) {
    auto& slots = out.emplace_back();
    for (const auto& w : workers) {
      auto it = position.find(w);
      slots.push_back(it != position.end() && it->second < layer.placement.size() ? layer.placement[it->second]
                                                                                   : std::vector<uint32_t>{});
    }
  }
  return out;
}

std::vector<uint32_t> host_labels(const std::vector<Participant>& workers) {
  std::vector<uint32_t> nodes;
  for (const auto& w : workers) nodes.push_back(w.node);
  return plan::first_seen_labels(nodes);
}

std::vector<uint32_t> rack_labels(const std::vector<Participant>& workers, const std::map<NodeId, std::string>& rack_of) {
  std::vector<NodeId> hosts;  // in the order of host_labels
  for (const auto& w : workers)
    if (std::find(hosts.begin(), hosts.end(), w.node) == hosts.end()) hosts.push_back(w.node);
  std::map<std::string, uint32_t> label;
  std::vector<uint32_t> out;
  bool named = false;
  for (NodeId n : hosts) {
    auto it = rack_of.find(n);
    named = named || it != rack_of.end();
    // a node in no rack: a rack of its own (no rack name starts with a space: mesh.racks' names are words)
    std::string rack = it != rack_of.end() ? it->second : " node " + std::to_string(n);
    out.push_back(label.emplace(rack, uint32_t(label.size())).first->second);
  }
  return named ? out : std::vector<uint32_t>{};
}

Result<PlanSwitch> switch_plan(const std::optional<AppliedPlan>& current, const std::vector<Participant>& participants,
                               const plan::Plan& next, uint64_t step, const std::set<plan::LayerExpert>& rebuilt) {
  if (participants.size() != next.nodes)
    return fail("the plan has ", next.nodes, " positions for ", participants.size(), " workers");
  size_t layers = next.layers.size();
  Physical phys = physical_nodes(current, participants, layers);
  std::vector<uint32_t> domain_of_node = host_labels(participants);
  domain_of_node.resize(phys.who.size(), UINT32_MAX);  // the ranks that are gone: no position
  auto remap = plan::greedy_remap(phys.held, phys.alive, next, domain_of_node);
  if (!remap) return remap.error().with_context("remapping workers onto the plan");
  // The workers in their order (the plan in force's ranks first) where that moves no more state:
  // their data planes are kept then instead of connected again.
  if (auto ordered = plan::ordered_remap(phys.held, phys.alive, next, ranks_first_order(current, participants), domain_of_node);
      ordered && ordered->fetched <= remap->fetched)
    *remap = std::move(*ordered);
  PlanSwitch out;
  for (uint32_t pos = 0; pos < next.nodes; ++pos) out.ranks.push_back(phys.who[size_t(remap->node_of_position[pos])]);
  if (step == 0) return out;  // nothing committed yet: every unit is its seeded value
  if (!current) return fail("step ", step, " has no plan in force to take its state from");
  auto moves = plan::transfer_schedule(phys.held, phys.alive, next, *remap, rebuilt);
  if (!moves) return moves.error();
  std::set<std::tuple<uint32_t, plan::ExpertId, uint32_t>> seen;
  for (const auto& t : *moves) {
    // One unit per expert per worker, however many slots it fills there.
    if (holds(phys.held, t.to_node, t.layer, t.expert) || !seen.insert({t.layer, t.expert, t.to_node}).second) continue;
    out.transfers.push_back({kExpert, int32_t(t.layer), int32_t(t.expert), uint32_t(remap->position_of_node[t.from_node]),
                             uint32_t(remap->position_of_node[t.to_node])});
    ++out.experts_moved;
  }
  out.experts_kept = remap->kept;
  SAL_TRY(dense_transfers(phys, *remap, layers, out));
  return out;
}

Received received_by(const PlanSwitch& sw, uint32_t rank) {
  Received r;
  for (const auto& t : sw.transfers) {
    if (t.to != rank) continue;
    if (t.kind == kExpert) ++r.experts;
    else r.dense = true;
  }
  return r;
}

Arranged arrange_groups(const std::optional<AppliedPlan>& current, const std::vector<Participant>& participants,
                        const plan::Plan& next) {
  if (!current || plan::group_count(next) <= 1 || plan::group_count(current->plan) <= 1 ||
      participants.size() != next.nodes)
    return {next, {}};
  std::vector<plan::IntactGroup> intact;  // workers named by their index in `participants`
  for (uint32_t g = 0; g < plan::group_count(current->plan); ++g) {
    plan::GroupSpan s = plan::group_span(current->plan, g);
    plan::IntactGroup ig{g, {}};
    for (uint32_t r = s.first; r < s.first + s.count && r < current->ranks.size(); ++r) {
      auto it = std::find(participants.begin(), participants.end(), current->ranks[r]);
      if (it == participants.end()) break;
      ig.workers.push_back(uint32_t(it - participants.begin()));
    }
    if (s.count > 0 && ig.workers.size() == s.count) intact.push_back(std::move(ig));
  }
  auto perm = plan::order_groups(next.groups, ranks_first_order(current, participants), intact);
  auto arranged = plan::permute_groups(next, perm);
  if (!arranged || (arranged->groups == next.groups && arranged->stacks == next.stacks)) return {next, {}};
  return {std::move(*arranged), std::move(perm)};
}

std::set<plan::LayerExpert> lost_experts(const std::optional<AppliedPlan>& current,
                                         const std::vector<Participant>& participants) {
  std::set<plan::LayerExpert> lost;
  if (!current) return lost;
  for (uint32_t l = 0; l < current->plan.layers.size(); ++l) {
    std::set<plan::ExpertId> held, all;
    const auto& placement = current->plan.layers[l].placement;
    for (size_t r = 0; r < placement.size(); ++r)
      for (auto e : placement[r]) {
        all.insert(e);
        if (r < current->ranks.size() && contains(participants, current->ranks[r])) held.insert(e);
      }
    for (auto e : all)
      if (!held.count(e)) lost.insert({l, e});
  }
  return lost;
}

std::vector<std::string> lost_state(const std::optional<AppliedPlan>& current,
                                    const std::vector<Participant>& participants) {
  std::vector<std::string> lost;
  if (!current) return lost;
  if (std::none_of(current->ranks.begin(), current->ranks.end(),
                   [&](const Participant& r) { return contains(participants, r); }))
    lost.push_back("the non-expert units");
  for (auto [l, e] : lost_experts(current, participants))
    lost.push_back("layer " + std::to_string(l) + " expert " + std::to_string(e));
  return lost;
}

wire::PlanUpdate plan_update(Epoch epoch, uint64_t step, const PlanSwitch& sw, const plan::Plan& next) {
  wire::PlanUpdate u;
  u.epoch = epoch;
  u.step = step;
  for (const auto& r : sw.ranks) u.ranks.push_back({uint32_t(r.node), r.index});
  u.plan = next;
  u.transfers = sw.transfers;
  return u;
}

}  // namespace sal::job
