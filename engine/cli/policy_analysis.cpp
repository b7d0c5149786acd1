// policy_analysis.cpp — see policy_analysis.h.
#include "cli/policy_analysis.h"

#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/paths.h"
#include "core/strings.h"
#include "plan/domains.h"
#include "policy/algo/frontier.h"
#include "policy/algo/moetion.h"
#include "policy/algo/spare.h"
#include "policy/algo/step_balance.h"
#include "policy/frontier_report.h"

namespace sal::cli {
namespace {

int failed(const char* sub, const Error& e) {
  std::fprintf(stderr, "salamander policy %s: %s\n", sub, e.message().c_str());
  return 1;
}

std::string method_text(const algo::RecoveryEstimate& r) { return std::string(algo::method_name(r.method)); }

// `policy recovery --plan PLAN.json --failures K`
int recovery_of_plan(const Parsed& p) {
  auto plan = read_plan_file(*p.get("--plan"));
  if (!plan) return failed("recovery", plan.error());
  auto k = p.get_int("--failures", 1, 0, 1 << 20);
  if (!k) return failed("recovery", k.error());
  // a plan with failure domains fails host by host: counted over its hosts
  const bool hosts = !plan->domains.empty();
  auto report = algo::recovery_report(policy::host_placements_of(*plan), int(*k));
  if (!report) return failed("recovery", report.error());
  // and, with racks, rack by rack (the joint figure)
  std::optional<algo::RecoveryReport> racks;
  if (!plan->racks.empty()) {
    auto r = algo::recovery_report(policy::rack_placements_of(*plan), int(*k));
    if (!r) return failed("recovery", r.error());
    racks = std::move(*r);
  }
  if (p.has("--json")) {
    nlohmann::ordered_json out;
    out["failures"] = *k;
    out["over"] = hosts ? "hosts" : "nodes";
    if (hosts) out["hosts"] = policy::host_count(*plan);
    if (racks) out["racks"] = {{"count", plan::domain_count(plan->racks)}, {"joint", racks->joint.p},
                               {"method", method_text(racks->joint)}};
    out["layers"] = nlohmann::ordered_json::array();
    for (const auto& l : report->layers) out["layers"].push_back(l.p);
    out["joint"] = report->joint.p;
    out["method"] = method_text(report->joint);
    if (report->joint.method == algo::RecoveryMethod::monte_carlo)
      out["interval"] = {report->joint.lo, report->joint.hi};
    std::puts(out.dump(2).c_str());
    return 0;
  }
  if (hosts)
    std::printf("P(plan survives %lld random host failures; %u positions on %u hosts):\n", (long long)*k, plan->nodes,
                policy::host_count(*plan));
  else
    std::printf("P(plan survives %lld random node failures):\n", (long long)*k);
  for (size_t l = 0; l < report->layers.size(); ++l)
    std::printf("  layer %-3zu %.6f  (%s)\n", l, report->layers[l].p, method_text(report->layers[l]).c_str());
  std::printf("  joint     %.6f  (%s", report->joint.p, method_text(report->joint).c_str());
  if (report->joint.method == algo::RecoveryMethod::monte_carlo)
    std::printf(", 95%% interval %.6f..%.6f", report->joint.lo, report->joint.hi);
  std::printf(")\n");
  if (racks)
    std::printf("P(plan survives %lld random rack failures; %u racks): joint %.6f  (%s)\n", (long long)*k,
                plan::domain_count(plan->racks), racks->joint.p, method_text(racks->joint).c_str());
  return 0;
}

// `policy recovery --compare mro,spread,compact --loads ... --nodes N --slots C`
int recovery_compare(const Parsed& p) {
  auto req = policy_plan_request(p, false);
  if (!req) return failed("recovery", req.error());
  if (auto sel = p.get("--layers")) {
    std::vector<std::vector<double>> picked;
    for (const auto& part : split(*sel, ',')) {
      auto l = parse_uint(part);
      if (!l || *l >= req->loads.size())
        return failed("recovery", fail("--layers: '", part, "' is not a layer of 0..", req->loads.size() - 1));
      picked.push_back(req->loads[*l]);
    }
    req->loads = std::move(picked);
  }
  auto max_k = p.get_int("--max-failures", std::min<int64_t>(req->nodes, 8), 0, 1 << 20);
  if (!max_k) return failed("recovery", max_k.error());
  std::vector<std::string> names = split(*p.get("--compare"), ',');
  policy::PolicySet set;
  std::vector<std::vector<algo::RecoveryEstimate>> curves;
  std::string note;
  for (const auto& name : names) {
    PlanRequest r = *req;
    r.placement = std::string(trim(name));
    auto plan = plan_offline(set, r, &note);
    if (!plan) return failed("recovery", plan.error());
    auto curve = algo::recovery_curve(placements_of(*plan), int(*max_k));
    if (!curve) return failed("recovery", curve.error().with_context(r.placement));
    curves.push_back(std::move(*curve));
  }
  if (p.has("--json")) {
    nlohmann::ordered_json out;
    out["nodes"] = req->nodes;
    out["slots"] = req->slots;
    out["min_replicas"] = req->min_replicas;
    out["allocation"] = req->allocation;
    if (!note.empty()) out["note"] = note;
    for (size_t i = 0; i < names.size(); ++i) {
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (const auto& e : curves[i]) rows.push_back({{"failures", e.failures}, {"p", e.p}, {"method", method_text(e)}});
      out["placements"][std::string(trim(names[i]))] = rows;
    }
    std::puts(out.dump(2).c_str());
    return 0;
  }
  std::printf("P(all %zu layers survive k random node failures): %u nodes x %u slots, f = %u, allocation %s%s\n\n",
              req->loads.size(), req->nodes, req->slots, req->min_replicas, req->allocation.c_str(),
              note.empty() ? "" : ("; " + note).c_str());
  std::printf("| failed nodes k |");
  for (const auto& n : names) std::printf(" %s |", std::string(trim(n)).c_str());
  std::printf("\n| ---: |");
  for (size_t i = 0; i < names.size(); ++i) std::printf(" ---: |");
  std::printf("\n");
  for (size_t k = 0; k < curves[0].size(); ++k) {
    std::printf("| %zu |", k);
    for (const auto& c : curves) std::printf(" %.4f%s |", c[k].p, c[k].method == algo::RecoveryMethod::monte_carlo ? "*" : "");
    std::printf("\n");
  }
  std::printf("\n(* Monte Carlo; every other value is exact or closed-form)\n");
  return 0;
}

// A plan of the request's allocation with another placement policy.
Result<plan::Plan> plan_with(policy::PolicySet& set, PlanRequest r, const std::string& placement,
                             policy::PlacementProposal* proposal = nullptr) {
  r.placement = placement;
  auto pl = plan_offline(set, r, nullptr, proposal);
  if (!pl) return pl.error().with_context("placement " + placement);
  return pl;
}

std::vector<std::vector<uint32_t>> replicas_of(const plan::Plan& p) {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& l : p.layers) out.push_back(l.replicas);
  return out;
}

void print_frontier_table(const nlohmann::ordered_json& j) {
  std::printf("| point | frontier | balance (mean) | median layer | P(1) | P(2) | P(3) | beaten by |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
  for (const auto& q : j["points"]) {
    std::printf("| %s | %s | %.3f | %.3f |", q["name"].get<std::string>().c_str(), q["frontier"].get<bool>() ? "yes" : "",
                q["balance"].get<double>(), q["median"].get<double>());
    for (const auto& p : q["p"]) std::printf(" %.4f |", p.get<double>());
    std::printf(" %s |\n", q.value("beaten_by", std::string()).c_str());
  }
}

}  // namespace

int print_frontier(const PlanRequest& req, bool json) {
  policy::PolicySet set;
  auto mro = plan_with(set, req, "mro");
  if (!mro) return failed("plan", mro.error());
  policy::PlacementProposal proposal;
  auto chosen = plan_with(set, req, req.placement, &proposal);
  if (!chosen) return failed("plan", chosen.error());
  algo::FrontierOptions o;
  o.nodes = int(req.nodes), o.slots = int(req.slots), o.floor = int(mro->floor);
  auto steps = algo::steps_by_layer(req.steps, req.loads.size());
  if (!steps) return failed("plan", steps.error().with_context("--steps"));
  o.steps = std::move(*steps);
  std::vector<algo::FrontierCandidate> include{{"mro", placements_of(*mro)}};
  if (req.placement != "mro" && req.placement != "goodput") include.push_back({req.placement, placements_of(*chosen)});
  auto f = algo::placement_frontier(policy::frontier_demand(replicas_of(*mro), req.loads), o, include);
  if (!f) return failed("plan", f.error().with_context("the frontier"));
  nlohmann::ordered_json j = policy::frontier_json(*f);
  j["nodes"] = req.nodes, j["slots"] = req.slots, j["floor"] = mro->floor, j["allocation"] = req.allocation;
  j["placement"] = req.placement;
  j["steps"] = req.steps.size();
  if (!proposal.note.empty()) j["note"] = proposal.note;
  if (!proposal.choice.empty()) j["choice"] = nlohmann::ordered_json::parse(proposal.choice, nullptr, false);
  if (json) return std::puts(j.dump(2).c_str()), 0;
  std::printf("%u nodes x %u slots, %zu layers, allocation %s, f = %u: the placements no other beats on both balance "
              "and recovery\n(balance: the busiest node's expert work over the mean, averaged over the layers%s; "
              "P(k): every layer survives k random node failures)\n\n",
              req.nodes, req.slots, req.loads.size(), req.allocation.c_str(), mro->floor,
              req.steps.empty() ? ""
                                : (", each of the last " + std::to_string(req.steps.size()) +
                                   " recorded steps split by counts, their mean").c_str());
  if (!req.steps_read.empty()) std::printf("recorded steps (--steps): %s\n\n", req.steps_read.c_str());
  print_frontier_table(j);
  std::printf("\nlowest balance these replicas allow: median layer %.3f\n", j["bound_median"].get<double>());
  if (!proposal.note.empty()) std::printf("placement %s chooses %s\n", req.placement.c_str(), proposal.note.c_str());
  return 0;
}

int policy_recovery(const Command& cmd, const Parsed& p) {
  if (p.has("--plan")) return recovery_of_plan(p);
  if (p.has("--compare")) return recovery_compare(p);
  return usage_error(cmd, "give --plan PLAN.json, or --compare with --loads, --nodes and --slots");
}

int policy_spare(const Command& cmd, const Parsed& p) {
  auto n = p.get_int("--groups", 0, 1, 1 << 20);
  if (!n) return usage_error(cmd, n.error().message());
  if (*n == 0) return usage_error(cmd, "--groups N is required");
  auto r_star = algo::optimal_redundancy(int(*n));
  auto r = p.get_int("--redundancy", r_star ? *r_star : 1, 1, *n);
  if (!r) return usage_error(cmd, r.error().message());
  auto layout = algo::spare_layout(int(*n), int(*r));
  if (!layout) return failed("spare", layout.error());
  auto mu = algo::mean_failures_endured(int(*n), int(*r));
  auto sbar = algo::mean_overhead(int(*n), int(*r));
  nlohmann::ordered_json j;
  j["groups"] = *n;
  j["redundancy"] = *r;
  j["marks"] = layout->marks;
  j["hosts"] = layout->hosted;
  j["max_common_hosts"] = algo::max_common_hosts(*layout);
  j["mean_failures_endured"] = mu ? *mu : -1;
  j["mean_overhead_lower_bound"] = sbar ? *sbar : -1;
  j["optimal_redundancy"] = r_star ? *r_star : -1;
  if (auto k = p.get_int("--failures", -1, 0, *n - 1); k && *k >= 0) {
    auto c = algo::min_depth_bound(int(*n), int(*k));
    j["failures"] = *k;
    j["min_depth"] = c ? *c : -1;
  }
  if (p.has("--save") && p.has("--mtbf") && p.has("--restart")) {
    auto ts = p.get_double("--save"), tf = p.get_double("--mtbf"), tr = p.get_double("--restart");
    if (!ts || !tf || !tr) return usage_error(cmd, "--save, --mtbf and --restart take numbers");
    auto tc = algo::optimal_checkpoint_period(*ts, *tf, *tr);
    auto a = algo::optimal_availability(*ts, *tf, *tr);
    if (!tc) return failed("spare", tc.error());
    j["optimal_checkpoint_period"] = *tc;
    j["optimal_availability"] = a ? *a : -1;
  }
  if (p.has("--json")) return std::puts(j.dump(2).c_str()), 0;
  std::printf("SPARe layout: %lld groups, r = %lld, ruler marks %s (no two shard types share more than %d host)\n",
              (long long)*n, (long long)*r, j["marks"].dump().c_str(), algo::max_common_hosts(*layout));
  for (size_t g = 0; g < layout->hosted.size() && g < 16; ++g)
    std::printf("  group %zu hosts %s\n", g, nlohmann::json(layout->hosted[g]).dump().c_str());
  if (layout->hosted.size() > 16) std::printf("  ... (%zu groups; --json for all)\n", layout->hosted.size());
  std::printf("mu(N,r)  failures endured before a wipe-out ~ %.2f\n", mu ? *mu : -1.0);
  std::printf("S(N,r)   mean rounds per step (lower bound, rho = 0) ~ %.3f\n", sbar ? *sbar : -1.0);
  std::printf("r*(N)    optimal redundancy = %d\n", r_star ? *r_star : -1);
  if (j.contains("min_depth"))
    std::printf("c(k)     depth bound after %lld failures = %d\n", (long long)j["failures"].get<int64_t>(),
                j["min_depth"].get<int>());
  if (j.contains("optimal_checkpoint_period"))
    std::printf("Tc*      optimal checkpoint period = %.4g, availability A* = %.4f\n",
                j["optimal_checkpoint_period"].get<double>(), j["optimal_availability"].get<double>());
  return 0;
}

int policy_window(const Command& cmd, const Parsed& p) {
  auto file = p.get("--profile");
  if (!file) return usage_error(cmd, "--profile FILE is required");
  auto text = read_file(*file);
  if (!text) return failed("window", text.error());
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("operators") || !j["operators"].is_array())
    return failed("window", Error(*file + ": expected {\"iteration_s\", \"bandwidth\", \"operators\": [...]}"));
  std::vector<algo::CheckpointOperator> ops;
  std::vector<std::string> names;
  for (size_t i = 0; i < j["operators"].size(); ++i) {
    const auto& o = j["operators"][i];
    if (!o.is_object() || !o.contains("full_bytes") || !o["full_bytes"].is_number())
      return failed("window", Error(*file + ": operators[" + std::to_string(i) + "] needs full_bytes"));
    algo::CheckpointOperator op;
    op.full_bytes = o["full_bytes"].get<uint64_t>();
    op.compute_bytes = o.value("compute_bytes", op.full_bytes / 3);
    op.popularity = o.value("popularity", 0.0);
    op.expert = o.value("kind", std::string("expert")) == "expert";
    ops.push_back(op);
    names.push_back(o.value("name", "op" + std::to_string(i)));
  }
  auto w = algo::find_window(ops, j.value("iteration_s", 1.0), j.value("bandwidth", 16e9));
  if (!w) return failed("window", w.error());
  nlohmann::ordered_json out;
  out["window"] = w->window;
  out["budget_bytes"] = w->budget_bytes;
  out["snapshot_bytes"] = w->snapshot_bytes;
  out["schedule"] = nlohmann::ordered_json::array();
  for (const auto& it : w->iterations) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (int op : it) row.push_back(names[size_t(op)]);
    out["schedule"].push_back(row);
  }
  if (p.has("--json")) return std::puts(out.dump(2).c_str()), 0;
  std::printf("W_sparse = %d iterations (budget %.3g bytes per iteration)\n", w->window, w->budget_bytes);
  for (size_t i = 0; i < w->iterations.size(); ++i)
    std::printf("  iteration %zu: %zu operators, %.3g bytes: %s\n", i, w->iterations[i].size(),
                double(w->snapshot_bytes[i]), clip(out["schedule"][i].dump(), 200).c_str());
  return 0;
}

}  // namespace sal::cli
