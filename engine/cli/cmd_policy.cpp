// cmd_policy.cpp — `salamander policy check|plan|recovery|spare|window`: the offline tools for
// people writing policies, and for scripts (every subcommand has --json). `plan --frontier` is in
// policy_analysis.cpp.
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/policy_analysis.h"
#include "cli/policy_tools.h"
#include "core/load_files.h"
#include "core/load_trace.h"
#include "core/strings.h"
#include "plan/validate.h"
#include "policy/algo/placement_balance.h"
#include "policy/failure_facts.h"
#include "policy/kinds.h"

namespace sal::cli {
namespace {

int print_json(const nlohmann::ordered_json& j) {
  std::puts(j.dump(2).c_str());
  return 0;
}

int report_error(const char* sub, const Error& e) {
  std::fprintf(stderr, "salamander policy %s: %s\n", sub, e.message().c_str());
  return 1;
}

}  // namespace

int policy_check(const Command&, const Parsed& p) {
  auto g = policy::check_file(p.positional[0]);
  std::string context;
  if (g) {  // decide once, on a made-up context of its kind, and validate what it proposes
    const policy::Kind kind = (*g)->kind();
    context = synthetic_context_text(kind);
    policy::PolicySet set;
    if (auto d = decide_offline(set, kind, p.positional[0], synthetic_input(kind)); !d)
      g = d.error().with_context("decide on a synthetic context (" + context + ")");
  }
  if (p.has("--json")) {
    nlohmann::ordered_json j;
    j["file"] = p.positional[0];
    j["ok"] = g.ok();
    if (g) {
      j["kind"] = std::string(policy::kind_name((*g)->kind()));
      j["name"] = (*g)->name();
      j["doc"] = (*g)->doc();
      j["selftest"] = (*g)->has_selftest();
      j["decide"] = "valid on a synthetic context (" + context + ")";
      j["hash"] = (*g)->hash();
    } else {
      j["error"] = g.error().message();
    }
    print_json(j);
    return g ? 0 : 1;
  }
  if (!g) return report_error("check", g.error());
  std::printf("%s: ok — %s policy '%s': %s (%s; decide valid on %s)\n", p.positional[0].c_str(),
              std::string(policy::kind_name((*g)->kind())).c_str(), (*g)->name().c_str(), (*g)->doc().c_str(),
              (*g)->has_selftest() ? "selftest passed" : "no selftest", context.c_str());
  return 0;
}

namespace {

// --steps DIR: the steps' counts per layer (core/load_trace.h: a file a step, or every rank's file of
// a step summed), in the order of the numbers in their names; the last kPlacementSteps are kept as
// the placement is told them, and `mean` is all of theirs.
Status read_steps(const std::string& dir, PlanRequest& r) {
  policy::StepLoads& steps = r.steps;
  std::vector<std::vector<double>>& mean = r.loads;
  auto trace = read_load_trace(dir);
  if (!trace) return trace.error().with_context("--steps");
  std::vector<std::vector<std::vector<double>>> all;
  for (auto& s : *trace) {
    if (!all.empty() && (s.loads.size() != all[0].size() || s.loads[0].size() != all[0][0].size()))
      return fail("--steps: ", s.files[0], " has ", s.loads.size(), " layers of ", s.loads[0].size(), " experts, ",
                  trace->front().files[0], " ", all[0].size(), " of ", all[0][0].size());
    all.push_back(std::move(s.loads));
  }
  r.steps_read = dir + ": " + describe_trace(*trace);
  mean.assign(all[0].size(), std::vector<double>(all[0][0].size(), 0.0));
  for (const auto& step : all)
    for (size_t l = 0; l < step.size(); ++l)
      for (size_t e = 0; e < step[l].size(); ++e) mean[l][e] += step[l][e] / double(all.size());
  for (size_t s = all.size() - std::min(all.size(), policy::kPlacementSteps); s < all.size(); ++s) {
    steps.emplace_back();
    for (const auto& layer : all[s]) {
      steps.back().emplace_back();
      for (double c : layer) steps.back().back().push_back(uint32_t(std::llround(std::min(c, 4e9))));
    }
  }
  return {};
}

// --current PLAN.json: what each of the request's nodes holds under that plan (nodes beyond it hold
// nothing: they joined), for as many layers as the loads have.
Status read_current(const std::string& path, PlanRequest& r) {
  auto plan = read_plan_file(path);
  if (!plan) return plan.error().with_context("--current");
  if (plan->layers.size() != r.loads.size())
    return fail("--current: ", path, " has ", plan->layers.size(), " layers, the loads ", r.loads.size());
  if (plan->nodes > r.nodes)
    return fail("--current: ", path, " has ", plan->nodes, " nodes, more than --nodes ", r.nodes,
                " (a re-plan for fewer nodes: give the plan of the nodes that are left)");
  if (plan->slots != r.slots)
    return fail("--current: ", path, " has ", plan->slots, " slots a node, --slots ", r.slots);
  for (const auto& layer : plan->layers) {
    auto& held = r.current.emplace_back(layer.placement);
    held.resize(r.nodes);
  }
  return {};
}

// --fetch-s and --horizon-s: both or neither, both > 0, with --current (ctx.moves).
Status read_moves(const Parsed& p, PlanRequest& r) {
  if (!p.has("--fetch-s") && !p.has("--horizon-s")) return {};
  if (!p.has("--fetch-s") || !p.has("--horizon-s")) return fail("--fetch-s and --horizon-s go together");
  if (r.current.empty()) return fail("--fetch-s and --horizon-s weigh a re-plan's moves: they need --current");
  for (auto [name, out] : {std::pair{"--fetch-s", &r.moves.replica_s}, std::pair{"--horizon-s", &r.moves.horizon_s}}) {
    auto v = p.get_double(name);
    if (!v || !(*v > 0)) return fail(name, " takes a number of seconds > 0");
    *out = *v;
  }
  r.moves.source = "--fetch-s and --horizon-s";
  return {};
}

Result<PlanRequest> plan_request(const Parsed& p, bool need_placement) {
  PlanRequest r;
  auto file = p.get("--loads");
  if (!file && !p.has("--steps")) return fail("--loads FILE (or --steps DIR) is required");
  if (auto dir = p.get("--steps")) SAL_TRY(read_steps(*dir, r));
  if (file) {
    auto loads = read_load_file(*file);
    if (std::error_code ec; !loads && std::filesystem::is_directory(*file, ec))
      return fail("--loads: ", loads.error().message(), " (a directory of recorded steps is --steps DIR)");
    if (!loads) return loads.error();
    r.loads = std::move(*loads);
    if (!r.steps.empty() && (r.steps[0].size() != r.loads.size() || r.steps[0][0].size() != r.loads[0].size()))
      return fail("--steps: ", r.steps[0].size(), " layers of ", r.steps[0][0].size(), " experts, --loads ",
                  r.loads.size(), " of ", r.loads[0].size());
  }
  auto nodes = p.get_int("--nodes", 0, 1, 1 << 20);
  auto slots = p.get_int("--slots", 0, 1, 1 << 16);
  auto f = p.get_int("--min-replicas", 2, 1, 1 << 16);
  for (auto* v : {&nodes, &slots, &f})
    if (!*v) return v->error();
  if (*nodes == 0 || *slots == 0) return fail("--nodes and --slots are required");
  r.nodes = uint32_t(*nodes);
  r.slots = uint32_t(*slots);
  r.min_replicas = uint32_t(*f);
  r.allocation = p.get_or("--allocation", "lazarus");
  if (need_placement) r.placement = p.get_or("--placement", "goodput");
  policy::FailureSettings stated;
  stated.stated_by = "--node-mtbf-h";
  for (auto [name, out] : {std::pair{"--node-mtbf-h", &stated.node_mtbf_h}, std::pair{"--correlated", &stated.correlated}}) {
    if (!p.has(name)) continue;
    auto v = p.get_double(name);
    if (!v || *v < 0) return fail(name, " takes a number >= 0");
    *out = *v;
  }
  if (stated.correlated > 1) return fail("--correlated is a probability: at most 1");
  r.failures = policy::failure_facts(stated, policy::FailureRate{}, 0, 1, "assumed");
  if (auto cur = p.get("--current")) SAL_TRY(read_current(*cur, r));
  SAL_TRY(read_moves(p, r));
  return r;
}

// "balance 1.04 · P(1) 1 · P(2) 0.9286 · P(3) 0.7857": the busiest node's expert work over the
// mean for these loads, and the probability the layer survives k random node failures.
std::string layer_figures(const algo::LayerPlacement& layer, const std::vector<double>& loads) {
  char buf[64];
  auto balance = algo::placement_imbalance(layer, loads);
  std::snprintf(buf, sizeof buf, "%.3f", balance ? *balance : 0.0);
  std::string out = "balance " + (balance ? std::string(buf) : "? (" + balance.error().message() + ")");
  for (int k = 1; k <= std::min<int>(3, int(layer.nodes.size()) - 1); ++k) {
    auto p = algo::recovery_probability(layer, k);
    std::snprintf(buf, sizeof buf, " · P(%d) %.4g", k, p ? p->p : 0.0);
    out += p ? std::string(buf) : " · P(" + std::to_string(k) + ") ?";
  }
  return out;
}

void print_plan_text(const plan::Plan& pl, const PlanRequest& r, const std::string& note,
                     const policy::PlacementProposal& placement) {
  std::printf("%u nodes x %u slots, %u experts, %zu layers; allocation %s, placement %s, floor f = %u%s\n",
              pl.nodes, pl.slots, pl.experts, pl.layers.size(), r.allocation.c_str(), r.placement.c_str(), pl.floor,
              note.empty() ? "" : (" (" + note + ")").c_str());
  std::printf("balance: the busiest node's expert work over the mean (each expert's load split evenly over its "
              "replicas; 1 is even); P(k): the layer survives k random node failures\n");
  if (!r.steps_read.empty()) std::printf("recorded steps (--steps): %s\n", r.steps_read.c_str());
  if (!placement.note.empty()) std::printf("placement %s: %s\n", r.placement.c_str(), placement.note.c_str());
  const auto layers = placements_of(pl);
  for (size_t l = 0; l < pl.layers.size(); ++l) {
    std::vector<std::string> reps;
    for (auto x : pl.layers[l].replicas) reps.push_back(std::to_string(x));
    std::printf("\nlayer %zu replicas: %s\n", l, join(reps, " ").c_str());
    std::printf("  %s\n", layer_figures(layers[l], r.loads[l % r.loads.size()]).c_str());
    for (size_t n = 0; n < pl.layers[l].placement.size(); ++n) {
      std::vector<std::string> slots;
      for (auto e : pl.layers[l].placement[n]) slots.push_back(std::to_string(e));
      std::printf("  node %zu: %s\n", n, join(slots, " ").c_str());
    }
  }
}

}  // namespace

int policy_plan(const Command& cmd, const Parsed& p) {
  auto req = plan_request(p, true);
  if (!req) return usage_error(cmd, req.error().message());
  if (p.has("--frontier")) return print_frontier(*req, p.has("--json"));
  policy::PolicySet set;
  std::string note;
  policy::PlacementProposal placement;
  auto pl = plan_offline(set, *req, &note, &placement);
  if (!pl) return report_error("plan", pl.error());
  if (p.has("--json")) return print_json(plan::plan_to_json(*pl));
  print_plan_text(*pl, *req, note, placement);
  return 0;
}

// Exposed for policy_analysis.cpp: the request parsing is shared.
Result<PlanRequest> policy_plan_request(const Parsed& p, bool need_placement) { return plan_request(p, need_placement); }

}  // namespace sal::cli
