// trace_plans.cpp — see trace_plans.h.
#include "support/trace_plans.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "core/clock.h"
#include "core/expert_split.h"
#include "policy/algo/frontier.h"
#include "policy/algo/placement_balance.h"
#include "policy/frontier_report.h"
#include "policy/kinds.h"
#include "core/load_files.h"

namespace sal::test {
namespace {

constexpr int kFailures = 3;  // P(1..3), as the frontier weighs them

struct Decided {
  std::vector<std::vector<double>> loads;
  policy::AllocationProposal allocation;
  policy::PlacementProposal placement;
};

Result<policy::Proposal> decide(policy::PolicySet& set, policy::Kind k, const std::string& name,
                                const policy::Input& in) {
  auto g = set.check(k, name);
  if (!g) return g.error().with_context(name);
  auto p = (*g)->decide(in);
  if (!p) return p.error().with_context(name);
  if (auto s = policy::ops_for(k).validate(*p, in); !s) return s.error().with_context(name);
  return p;
}

Result<Decided> decide_pair(policy::PolicySet& set, const std::string& file, uint32_t nodes, uint32_t slots,
                            uint32_t floor, const std::string& allocation, const std::string& placement) {
  Decided d;
  auto loads = read_load_file(file);
  if (!loads) return loads.error();
  d.loads = std::move(*loads);
  const auto experts = uint32_t(d.loads[0].size());
  auto a = decide(set, policy::Kind::allocation, allocation, policy::AllocationInput{nodes, slots, experts, floor, d.loads});
  if (!a) return a.error();
  d.allocation = std::get<policy::AllocationProposal>(*a);
  policy::PlacementInput pin{nodes, slots, experts, d.allocation.floor, d.allocation.replicas, d.loads, {}};
  auto p = decide(set, policy::Kind::placement, placement, pin);
  if (!p) return p.error();
  d.placement = std::get<policy::PlacementProposal>(*p);
  return d;
}

std::vector<algo::LayerPlacement> layers_of(const Decided& d) {
  std::vector<algo::LayerPlacement> out;
  for (const auto& layer : d.placement.placement) {
    algo::LayerPlacement lp{int(d.loads[0].size()), {}};
    for (const auto& node : layer) lp.nodes.emplace_back(node.begin(), node.end());
    out.push_back(std::move(lp));
  }
  return out;
}

PlanFigures figures_of(const std::string& name, const std::vector<double>& balance, std::vector<double> p) {
  PlanFigures f{name, algo::median(balance), 0, 0, 0, std::move(p)};
  if (balance.empty()) return f;
  for (double b : balance) f.mean += b / double(balance.size());
  f.min = *std::min_element(balance.begin(), balance.end());
  f.max = *std::max_element(balance.begin(), balance.end());
  return f;
}

PlanFigures figures_of(const algo::FrontierPoint& p) { return figures_of(p.name, p.balance, p.p); }

// A plan's median per-layer balance when the dispatcher splits each step's tokens by the counts
// (core/expert_split.h) instead of evenly, on the file's loads.
double median_by_counts(const Decided& d) {
  std::vector<double> balance;
  const auto layers = layers_of(d);
  for (size_t l = 0; l < layers.size() && l < d.loads.size(); ++l) {
    const SplitTable units = units_of(layers[l].nodes, d.loads[l].size());
    std::vector<uint64_t> totals;
    for (double x : d.loads[l]) totals.push_back(uint64_t(std::llround(x)));
    balance.push_back(split_imbalance(balanced_split(totals, units, {}), {}));
  }
  return algo::median(balance);
}

uint64_t iteration_of(const std::string& file) {
  std::smatch m;
  const std::string name = std::filesystem::path(file).filename().string();
  return std::regex_search(name, m, std::regex("iter([0-9]+)")) ? std::stoull(m[1]) : 0;
}

}  // namespace

std::string smartmoe_rank0_dir() { return std::string(SAL_SOURCE_DIR) + "/../shared/data/smartmoe-expert-load-trace/rank0"; }

std::vector<std::string> trace_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".log") out.push_back(entry.path().string());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return iteration_of(a) < iteration_of(b); });
  return out;
}

Result<PlanFigures> pair_figures(policy::PolicySet& set, const std::string& file, uint32_t nodes, uint32_t slots,
                                 uint32_t floor, const std::string& allocation, const std::string& placement) {
  auto d = decide_pair(set, file, nodes, slots, floor, allocation, placement);
  if (!d) return d.error();
  std::vector<double> balance, p;
  const auto layers = layers_of(*d);
  for (size_t l = 0; l < layers.size(); ++l) {
    auto b = algo::placement_imbalance(layers[l], d->loads[l]);
    if (!b) return b.error();
    balance.push_back(*b);
  }
  auto curve = algo::recovery_curve(layers, kFailures);
  if (!curve) return curve.error();
  for (int k = 1; k <= kFailures; ++k) p.push_back((*curve)[size_t(k)].p);
  return figures_of(allocation + " + " + placement, balance, p);
}

Result<TraceFigures> trace_figures(policy::PolicySet& set, const std::string& file, uint32_t nodes, uint32_t slots,
                                   uint32_t floor) {
  auto mro = decide_pair(set, file, nodes, slots, floor, "lazarus", "mro");
  if (!mro) return mro.error();
  auto chosen = decide_pair(set, file, nodes, slots, floor, "lazarus", "goodput");
  if (!chosen) return chosen.error();
  algo::FrontierOptions o;
  o.nodes = int(nodes), o.slots = int(slots), o.floor = int(mro->allocation.floor);
  const int64_t t0 = mono_ns();
  auto f = algo::placement_frontier(policy::frontier_demand(mro->allocation.replicas, mro->loads), o,
                                    {{"mro", layers_of(*mro)}});
  if (!f) return f.error().with_context(file);
  TraceFigures out;
  out.frontier_ms = double(mono_ns() - t0) / 1e6;
  out.iteration = iteration_of(file);
  out.bound = algo::median(f->bound);
  out.frontier_points = int(f->points.size());
  for (const auto& p : f->points) {  // by balance: the first on the frontier with P(1) = 1
    if (p.name == "mro") out.mro = figures_of(p);
    if (p.on_frontier && p.p[0] == 1.0 && out.best.name.empty()) out.best = figures_of(p);
  }
  const auto c = nlohmann::json::parse(chosen->placement.choice, nullptr, false);
  if (!c.is_object()) return fail(file, ": the goodput placement gave no choice");
  out.chosen = figures_of(c["point"].get<std::string>(), c["balances"].get<std::vector<double>>(),
                          c["p"].get<std::vector<double>>());
  out.chosen_by_counts = median_by_counts(*chosen);
  return out;
}

}  // namespace sal::test
