// frontier.cpp — see frontier.h. Builds every candidate, scores it (balance per layer, P(k) of the
// whole plan), and marks the ones no other candidate beats.
#include "policy/algo/frontier.h"

#include <algorithm>
#include <cmath>

#include "core/deadline.h"
#include "policy/algo/placement_balance.h"
#include "policy/algo/step_balance.h"

namespace sal::algo {
namespace {

// Figures closer than this are equal: sums of loads in a different order differ in the last bits.
constexpr double kTie = 1e-9;

// Moves the balancer scores per layer and candidate unless the caller says: kBalanceWork / N,
// within the bounds. About a quarter of balance_placement's own default: the frontier balances
// c + 2 candidates, and at 1024 nodes a budget four times larger moved the balance by < 0.001
// (its local search has converged); at 16 nodes the search ends at a local optimum before the cap.
constexpr uint64_t kBalanceWork = 5'000'000, kMinBalance = 2'000, kMaxBalance = 100'000;

// The constructions, by number: blocks of `slots` .. 1 experts, 0 balance first, -1 chain, -2 mixed.
constexpr int kChain = -1, kMixed = -2;

std::string construction_name(int group) {
  if (group == kMixed) return "mixed";
  if (group == kChain) return "chain";
  return group == 0 ? "balance-first" : "blocks-" + std::to_string(group);
}

Result<LayerPlacement> layout(const LayerDemand& d, const FrontierOptions& o, int group) {
  if (group == kMixed) return mixed_layout(d, o.nodes, o.slots, o.floor);
  if (group == kChain) return chain_layout(d, o.nodes, o.slots, o.floor);
  return blocks_layout(d, o.nodes, o.slots, group, o.floor);
}

Result<FrontierPoint> score(std::string name, std::vector<LayerPlacement> layers,
                            const std::vector<LayerDemand>& demand, const FrontierOptions& o) {
  FrontierPoint p;
  p.name = std::move(name);
  p.mean_balance = p.mean_load_balance = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    auto b = placement_imbalance(layers[l], demand[l].loads);
    if (!b) return b.error().with_context(p.name + ", layer " + std::to_string(l));
    p.load_balance.push_back(*b);
    p.mean_load_balance += *b / double(layers.size());
    const double judged = o.steps.empty() ? *b : step_imbalance(layers[l], o.steps[l], o.split_by_counts);
    p.balance.push_back(judged);
    p.mean_balance += judged / double(layers.size());
  }
  auto curve = recovery_curve(layers, o.max_failures);
  if (!curve) return curve.error().with_context(p.name);
  for (int k = 1; k <= o.max_failures; ++k) p.p.push_back((*curve)[size_t(k)].p);
  p.layers = std::move(layers);
  return p;
}

// One construction over every layer, evened out; empty when some layer misses the floor.
Result<std::vector<LayerPlacement>> construct(const std::vector<LayerDemand>& demand, const FrontierOptions& o,
                                              int group) {
  std::vector<LayerPlacement> out;
  for (size_t l = 0; l < demand.size(); ++l) {
    if (deadline_passed()) return fail("stopped: the calling budget ran out");
    auto start = layout(demand[l], o, group);
    if (!start) return start.error().with_context("layer " + std::to_string(l));
    BalanceOptions b;
    b.floor = o.floor;
    b.max_evaluations = o.balance_evaluations ? o.balance_evaluations
                                              : std::clamp(kBalanceWork / uint64_t(o.nodes), kMinBalance, kMaxBalance);
    // blocks, balance first and chain dealt their free replicas least loaded first already; mixed
    // placed its replicas for their node sets, and the balancer moves experts between equal sets
    b.redeal = false;
    auto even = balance_placement(*start, demand[l].loads, b);
    if (!even) return even.error().with_context("layer " + std::to_string(l));
    even->layer.experts = int(demand[l].replicas.size());
    if (!spans_floor(even->layer, demand[l].replicas, o.floor)) return std::vector<LayerPlacement>{};
    out.push_back(std::move(even->layer));
  }
  return out;
}

Status check_candidate(const FrontierCandidate& c, const std::vector<LayerDemand>& demand, int nodes) {
  if (c.layers.size() != demand.size())
    return fail("candidate '", c.name, "' has ", c.layers.size(), " layers, the replicas ", demand.size());
  for (size_t l = 0; l < c.layers.size(); ++l)
    if (int(c.layers[l].nodes.size()) != nodes)
      return fail("candidate '", c.name, "' layer ", l, " has ", c.layers[l].nodes.size(), " nodes, not ", nodes);
  return {};
}

bool same_figures(const FrontierPoint& a, const FrontierPoint& b) {
  if (std::fabs(a.mean_balance - b.mean_balance) > kTie) return false;
  for (size_t k = 0; k < a.p.size(); ++k)
    if (std::fabs(a.p[k] - b.p[k]) > kTie) return false;
  return true;
}

// In candidate order: a point is off the frontier when another beats it, or has the same figures
// and came first (the caller's candidates first, then the most structure).
void mark(std::vector<FrontierPoint>& points) {
  for (size_t i = 0; i < points.size(); ++i) {
    points[i].on_frontier = true;
    for (size_t j = 0; j < points.size() && points[i].on_frontier; ++j) {
      if (j == i) continue;
      if (beats(points[j], points[i]) || (j < i && same_figures(points[j], points[i]))) {
        points[i].on_frontier = false;
        points[i].beaten_by = points[j].name;
      }
    }
  }
}

}  // namespace

bool beats(const FrontierPoint& a, const FrontierPoint& b) {
  if (a.mean_balance > b.mean_balance + kTie) return false;
  bool better = a.mean_balance < b.mean_balance - kTie;
  for (size_t k = 0; k < a.p.size() && k < b.p.size(); ++k) {
    if (a.p[k] < b.p[k] - kTie) return false;
    better = better || a.p[k] > b.p[k] + kTie;
  }
  return better;
}

double median(std::vector<double> values) {
  if (values.empty()) return 1;
  std::sort(values.begin(), values.end());
  const size_t m = values.size() / 2;
  return values.size() % 2 ? values[m] : (values[m - 1] + values[m]) / 2;
}

Result<Frontier> placement_frontier(const std::vector<LayerDemand>& layers, const FrontierOptions& o,
                                    const std::vector<FrontierCandidate>& extra) {
  if (layers.empty()) return fail("the frontier needs at least one layer");
  if (o.max_failures < 1) return fail("max_failures must be at least 1");
  if (!o.steps.empty() && o.steps.size() != layers.size())
    return fail("the steps are given for ", o.steps.size(), " layers, the replicas for ", layers.size());
  Frontier f;
  for (const auto& d : layers) f.bound.push_back(balance_bound(d, o.nodes));
  for (const auto& c : extra) {
    SAL_TRY(check_candidate(c, layers, o.nodes));
    auto p = score(c.name, c.layers, layers, o);
    if (!p) return p.error();
    f.points.push_back(std::move(*p));
  }
  for (const auto& name : o.only.value_or(std::vector<std::string>{})) {
    bool known = false;
    for (int group = kMixed; group <= o.slots && !known; ++group) known = name == construction_name(group);
    if (!known)
      return fail("no construction '", name, "' (blocks-1 .. blocks-", o.slots, ", balance-first, chain, mixed)");
  }
  for (int group = o.slots; group >= kMixed; --group) {
    if (o.only && std::find(o.only->begin(), o.only->end(), construction_name(group)) == o.only->end()) continue;
    auto built = construct(layers, o, group);
    if (!built) return built.error().with_context(construction_name(group));
    if (built->empty()) {
      ++f.invalid;
      continue;
    }
    auto p = score(construction_name(group), std::move(*built), layers, o);
    if (!p) return p.error();
    f.points.push_back(std::move(*p));
  }
  mark(f.points);
  std::stable_sort(f.points.begin(), f.points.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
    if (std::fabs(a.mean_balance - b.mean_balance) > kTie) return a.mean_balance < b.mean_balance;
    return a.p > b.p;
  });
  return f;
}

}  // namespace sal::algo
