// test_sim.cpp — the simulator's foundations: the event core pops in time order with a stable
// tie-break; runs are deterministic for a seed; exponential failures give Poisson counts (mean and
// variance λT) and Weibull draws the law's mean; the ETTR simulation agrees with its closed form;
// `salamander sim spare` and `sim ettr` print Monte Carlo beside closed forms that agree. Whole
// scenarios (run_simulation): deterministic for a seed; the cluster's exponential failures are
// Poisson; Salamander's restores match the policy library's exact recovery probability for the same
// placement; scenario errors name the field; each strategy reacts as it should to a scripted fault;
// MoEtion bounds the steps a restore loses and the oracle's interval follows the MTBF; goodput
// counts only the samples kept (never below 0); `salamander sim` says once each distinct warning
// (with its count at the end) and lets --set win over a sweep of the same field, saying so.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "policy/algo/recovery.h"
#include "policy/policy_set.h"
#include "sim/checkpointing.h"
#include "sim/trial.h"
#include "sim/ettr.h"
#include "sim/event_queue.h"
#include "sim/failures.h"
#include "sim/run.h"
#include "sim/scenario.h"
#include "sim/strategy.h"
#include "sim/workload.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::sim;

namespace {

// The binary's stdout and stderr; CHECKs its exit status.
std::string run(const std::string& args, int expect_status = 0) {
  std::string out;
  FILE* f = popen(("(" + std::string(SAL_BIN) + " " + args + ") 2>&1").c_str(), "r");
  REQUIRE(f);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  int status = pclose(f);
  CHECK(WEXITSTATUS(status) == expect_status);
  return out;
}

using json = nlohmann::json;

// A scenario table as JSON, read as the REPL's sim.run{...} reads it.
Result<ScenarioFile> scenario(json spec) { return scenario_file_from_json(std::move(spec), "test", "."); }

// Runs a scenario that must read and run; its one point.
PointResult run_point(json spec, RunOptions o = {}) {
  auto f = scenario(std::move(spec));
  REQUIRE_MESSAGE(f.ok(), (f.ok() ? "" : f.error().message()));
  auto r = run_simulation(*f, o);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message()));
  REQUIRE(r->points.size() == 1);
  return r->points.front();
}

const StrategySummary& by_label(const PointResult& p, const std::string& label) {
  for (const auto& s : p.strategies)
    if (s.label == label) return s;
  FAIL("no strategy " << label);
  return p.strategies.front();
}

// The error message of a scenario that must be refused (empty when it was accepted).
std::string refusal(json spec) {
  auto f = scenario(std::move(spec));
  CHECK_FALSE(f.ok());
  return f.ok() ? std::string() : f.error().message();
}

// Writes `text` to a file `name` in a new temporary directory; its path.
std::string temp_file(const std::string& name, const std::string& text) {
  std::string path = sal::test::temp_dir("simtest") + "/" + name;
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

// How many times `what` occurs in `text`.
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The small Salamander scenario the error cases start from.
json small_scenario() {
  return {{"cluster", {{"nodes", 8}, {"gpus_per_node", 1}, {"slots_per_gpu", 2}}},
          {"workload", {{"layers", 1}, {"experts", 6}, {"top_k", 2}, {"tokens_per_step", 1024}}},
          {"step", {{"fixed_s", 1}}},
          {"strategies", {"salamander"}},
          {"stop", {{"steps", 20}}}};
}

}  // namespace

TEST_CASE("the event core pops in time order, ties in scheduling order") {
  EventQueue q;
  q.schedule(5, 1, 50);
  q.schedule(1, 2, 10);
  q.schedule(5, 3, 51);
  q.schedule(0.5, 4, 5);
  std::vector<int64_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  CHECK(order == std::vector<int64_t>{5, 10, 50, 51});
  CHECK(q.popped() == 4);
}

TEST_CASE("exponential failures of a node population are a Poisson process: mean and variance of counts") {
  // 50 nodes, each failing with mean 1000 s and replaced at once; count failures in 200 s windows.
  auto law = exponential(1000);
  REQUIRE(law.ok());
  algo::Rng rng(7);
  const int nodes = 50, trials = 4000;
  const double window = 200, expect = nodes * window / 1000;  // λT = 10
  double sum = 0, sum_sq = 0;
  for (int t = 0; t < trials; ++t) {
    EventQueue q;
    for (int n = 0; n < nodes; ++n) q.schedule(time_to_failure(*law, rng), 0, n);
    int count = 0;
    while (q.top().time < window) {
      Event e = q.pop();
      ++count;
      q.schedule(e.time + time_to_failure(*law, rng), 0, e.a);
    }
    sum += count;
    sum_sq += double(count) * count;
  }
  double mean = sum / trials, var = sum_sq / trials - mean * mean;
  MESSAGE("failures per window: mean " << mean << ", variance " << var << " (Poisson: both " << expect << ")");
  CHECK(mean == doctest::Approx(expect).epsilon(0.02));
  CHECK(var == doctest::Approx(expect).epsilon(0.08));
}

TEST_CASE("Weibull draws have the law's mean, and shape k < 1 is over-dispersed") {
  auto law = weibull(600, 0.78);
  REQUIRE(law.ok());
  algo::Rng rng(3);
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double x = time_to_failure(*law, rng);
    sum += x;
    sum_sq += x * x;
  }
  double mean = sum / n, cv = std::sqrt(sum_sq / n - mean * mean) / mean;
  CHECK(mean == doctest::Approx(600).epsilon(0.01));
  CHECK(cv > 1.1);  // an exponential's coefficient of variation is 1
  CHECK_FALSE(weibull(600, 0).ok());
  CHECK_FALSE(exponential(-1).ok());
}

TEST_CASE("the ETTR simulation is deterministic for a seed and matches the closed form") {
  for (auto [mtbf, interval, ckpt, restart] : {std::tuple{3600.0, 100, 10.0, 60.0}, std::tuple{600.0, 50, 5.0, 120.0},
                                                std::tuple{300.0, 200, 2.0, 30.0}}) {
    EttrModel m{1.0, interval, ckpt, restart, *exponential(mtbf)};
    auto a = simulate_ettr(m, 1000, 20, 11), b = simulate_ettr(m, 1000, 20, 11), c = simulate_ettr(m, 1000, 20, 12);
    REQUIRE(a.ok());
    CHECK(a->ettr == b->ettr);
    CHECK(a->events == b->events);
    CHECK(a->ettr != c->ettr);
    auto closed = ettr_closed_form(m);
    REQUIRE(closed.ok());
    MESSAGE("MTBF " << mtbf << ": simulated " << a->ettr << " ± " << a->stderr_ettr << ", closed form " << *closed);
    CHECK(std::abs(a->ettr - *closed) < std::max(4 * a->stderr_ettr, 0.002));
  }
  EttrModel w{1.0, 100, 10.0, 60.0, *weibull(3600, 0.78)};
  CHECK_FALSE(ettr_closed_form(w).ok());
  CHECK(simulate_ettr(w, 100, 2, 1).ok());
  EttrModel bad{1.0, 0, 10.0, 60.0, *exponential(10)};
  CHECK_FALSE(simulate_ettr(bad, 10, 1, 1).ok());
}

TEST_CASE("salamander sim spare and sim ettr: the Monte Carlo beside closed forms that agree") {
  auto spare = nlohmann::json::parse(run("sim spare --groups 200 --redundancy 3 --trials 400 --json"));
  double mc = spare["mean_failures"], mu = spare["mean_failures_closed_form"];
  CHECK(mc == doctest::Approx(mu).epsilon(0.06));
  CHECK(spare["mean_depth"].get<double>() >= spare["mean_depth_lower_bound"].get<double>() - 1e-9);
  auto ettr = nlohmann::json::parse(run("sim ettr --mtbf 3600 --iter-time 1 --interval 100 --ckpt-time 10 --json"));
  CHECK(ettr["ettr"].get<double>() == doctest::Approx(ettr["ettr_closed_form"].get<double>()).epsilon(0.01));
  std::string bad = run("sim ettr --mtbf 3600 --iter-time 1 --ckpt-time 10 --json", 2);
  CHECK(bad.find("--interval N is required") != std::string::npos);
}

TEST_CASE("a scenario run is deterministic for a seed and changes with it") {
  json spec = {{"trials", 3},
               {"seed", 5},
               {"cluster", {{"nodes", 8}, {"gpus_per_node", 1}, {"slots_per_gpu", 2}}},
               {"failures", {{"law", "exponential"}, {"mtbf_s", 400}, {"repair_s", 60}, {"repair_random", true}}},
               {"workload", {{"layers", 2}, {"experts", 6}, {"top_k", 2}, {"tokens_per_step", 1024}}},
               {"step", {{"fixed_s", 1}, {"dense_state_bytes", 1e9}}},
               {"strategies", {"salamander", {{"kind", "checkpoint-restart"}, {"checkpoint", {{"kind", "dense"}, {"every", 20}}}}}},
               {"stop", {{"steps", 200}}}};
  auto f = scenario(spec);
  REQUIRE(f.ok());
  // Everything but the measured times (the run's wall time, the policies' plan_ms).
  auto simulated = [&](int64_t seed) {
    RunOptions o;
    o.seed = seed;
    auto r = run_simulation(*f, o);
    REQUIRE(r.ok());
    auto j = result_json(*r);
    j.erase("wall_s");
    for (auto& p : j["points"])
      for (auto& s : p["strategies"]) s.erase("plan_ms");
    return j.dump();
  };
  std::string a = simulated(5), b = simulated(5), c = simulated(6);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(json::parse(a)["points"][0]["strategies"][0]["failures"]["mean"].get<double>() > 0);  // failures did happen
}

TEST_CASE("the cluster's exponential failures are Poisson: mean and variance of counts over a horizon") {
  // 100 nodes, each failing with mean 1000 s and back at once (repair_s 0): a Poisson process of
  // rate 100/1000 per second, so λT = 10 failures in 100 s. The job restarts for longer than the
  // horizon after its first failure, so the later ones are only counted.
  const int nodes = 100, trials = 2000;
  const double mtbf = 1000, horizon = 100, expect = nodes * horizon / mtbf;
  json spec = {{"trials", trials},
               {"seed", 3},
               {"cluster", {{"nodes", nodes}}},
               {"failures", {{"law", "exponential"}, {"mtbf_s", mtbf}, {"repair_s", 0}}},
               {"step", {{"shard_s", 50}}},
               {"strategies", {{{"kind", "checkpoint-only"}, {"checkpoint", {{"kind", "dense"}, {"every", 100}}},
                                {"costs", {{"restart_s", 1e9}}}}}},
               {"stop", {{"horizon_s", horizon}}}};
  auto p = run_point(spec);
  const auto& s = p.strategies.front();
  double mean = s.failures.mean, var = s.failures.se * s.failures.se * trials;
  MESSAGE("failures in " << horizon << " s: mean " << mean << " ± " << s.failures.se << ", variance " << var
                         << " (Poisson: both " << expect << ")");
  CHECK(std::abs(mean - expect) < 4 * s.failures.se);
  CHECK(var / mean > 0.8);
  CHECK(var / mean < 1.25);
}

TEST_CASE("Salamander's restores match the exact recovery probability of its placement") {
  // 8 nodes × 2 slots, 6 experts with f = 2: 3 random nodes fail at once at t = 5. The job
  // survives iff the initial placement keeps every expert, so P(no restore) = P(3) of the library.
  const int trials = 4000;
  json spec = small_scenario();
  spec["trials"] = trials;
  spec["failures"] = {{"faults", {{{"at_s", 5}, {"count", 3}}}}};
  spec["strategies"] = {{{"kind", "salamander"}, {"min_replicas", 2}}};
  auto p = run_point(spec);
  const auto& s = p.strategies.front();

  // The same plan from the same policies.
  policy::PolicySet set;
  REQUIRE(set.load(policy::Kind::allocation, "lazarus", "test").ok());
  REQUIRE(set.load(policy::Kind::placement, "mro", "test").ok());
  std::vector<std::vector<double>> loads{std::vector<double>(6, 1024.0 * 2 / 6)};
  policy::AllocationInput ain{8, 2, 6, 2, loads};
  auto alloc = set.slot(policy::Kind::allocation).decide(ain);
  const auto& ap = std::get<policy::AllocationProposal>(alloc.proposal);
  CHECK(ap.floor == 2);
  policy::PlacementInput pin{8, 2, 6, ap.floor, ap.replicas, loads, {}};
  auto place = set.slot(policy::Kind::placement).decide(pin);
  const auto& pp = std::get<policy::PlacementProposal>(place.proposal);
  std::vector<algo::LayerPlacement> layers{{6, {}}};
  for (const auto& node : pp.placement[0]) layers[0].nodes.emplace_back(node.begin(), node.end());
  auto p3 = algo::joint_recovery_probability(layers, 3);
  auto p2 = algo::joint_recovery_probability(layers, 2);
  REQUIRE(p3.ok());
  REQUIRE(p2.ok());
  CHECK(p3->method != algo::RecoveryMethod::monte_carlo);
  CHECK(p2->method != algo::RecoveryMethod::monte_carlo);

  double survived = 1 - s.restores.mean;
  MESSAGE("P(survive 3) simulated " << survived << " ± " << s.restores.se << ", exact " << p3->p << " ("
                                    << algo::method_name(p3->method) << ")");
  CHECK(s.failures.mean == 3);
  CHECK(s.restores.se > 0);
  CHECK(std::abs(survived - p3->p) < 4 * s.restores.se);

  // The per-failure record: the k-th failure's predicted conditional survival is P(k)/P(k−1), and
  // the share observed to survive agrees with it.
  const double conditional[] = {1, 1, p2->p, p3->p / p2->p};
  int seen = 0;
  for (const auto& rp : s.recovery) {
    if (rp.k < 2 || rp.k > 3) continue;
    ++seen;
    double se = std::sqrt(rp.predicted * (1 - rp.predicted) / double(rp.failures));
    MESSAGE("k = " << rp.k << ": " << rp.failures << " failures, predicted " << rp.predicted << ", observed "
                   << rp.observed << " (± " << se << ")");
    CHECK(rp.predicted == doctest::Approx(conditional[rp.k]).epsilon(1e-9));
    CHECK(rp.failures > uint64_t(trials / 2));
    CHECK(std::abs(rp.predicted - rp.observed) < 4 * se);
  }
  CHECK(seen == 2);
}

TEST_CASE("scenario errors name the field") {
  json top_k = small_scenario();
  top_k["workload"]["top_k"] = 9;
  CHECK(refusal(top_k).find("workload.top_k") != std::string::npos);

  json unknown = small_scenario();
  unknown["cluster"]["nodez"] = 4;
  std::string u = refusal(unknown);
  CHECK(u.find("cluster.nodez") != std::string::npos);
  CHECK(u.find("unknown field") != std::string::npos);

  json kind = small_scenario();
  kind["strategies"] = {"nope"};
  CHECK(refusal(kind).find("strategies[1].kind") != std::string::npos);

  // A bad sweep value is refused when the file is read, before anything runs.
  json sweep = small_scenario();
  sweep["sweep"] = {{{"param", "cluster.nodes"}, {"values", {4, "x"}}}};
  CHECK(refusal(sweep).find("cluster.nodes") != std::string::npos);
  json good_sweep = small_scenario();
  good_sweep["sweep"] = {{{"param", "cluster.nodes"}, {"values", {4, 8}}}};
  CHECK(scenario(good_sweep).ok());

  json two_sources = small_scenario();
  two_sources["failures"] = {{"law", "exponential"}, {"mtbf_s", 100}, {"faults", {{{"at_s", 1}}}}};
  CHECK(refusal(two_sources).find("failures") != std::string::npos);
}

TEST_CASE("strategies react to a scripted fault as they should") {
  // Node 0 of 8 fails mid-way between dense checkpoints 50 and 100 (each step takes 1 s).
  json planned = small_scenario();
  planned["failures"] = {{"faults", {{{"at_s", 75.5}, {"node", 0}}}}};
  planned["strategies"] = {{{"kind", "salamander"}, {"min_replicas", 2}},
                           {{"kind", "checkpoint-restart"}, {"checkpoint", {{"kind", "dense"}, {"every", 50}}}}};
  planned["stop"] = {{"steps", 300}};
  auto p = run_point(planned);
  const auto& sal = by_label(p, "salamander");
  CHECK(sal.failures.mean == 1);
  CHECK(sal.restores.mean == 0);
  CHECK(sal.reconfigurations.mean == 1);
  CHECK(sal.lost_steps.mean == 0);
  const auto& ckpt = by_label(p, "checkpoint-restart");
  CHECK(ckpt.restores.mean == 1);
  CHECK(ckpt.lost_steps.mean == 25);
  CHECK(ckpt.jct_s.mean > sal.jct_s.mean);

  // Stacked groups without redundancy: every failure is a restore (faults apart by more than a restart).
  json stacked = {{"cluster", {{"nodes", 16}}},
                  {"failures", {{"faults", {{{"at_s", 10.5}}, {{"at_s", 200.5}}, {{"at_s", 400.5}}}}}},
                  {"step", {{"shard_s", 1}, {"dense_state_bytes", 1e9}}},
                  {"strategies", {"checkpoint-only"}},
                  {"stop", {{"steps", 600}}}};
  auto q = run_point(stacked);
  CHECK(q.strategies.front().failures.mean == 3);
  CHECK(q.strategies.front().restores.mean == 3);
  CHECK(q.strategies.front().masked.mean == 0);

  // SPARe with r = 3 on 31 groups masks a single failure.
  json spare = {{"cluster", {{"nodes", 31}}},
                {"failures", {{"faults", {{{"at_s", 10.5}, {"node", 4}}}}}},
                {"step", {{"shard_s", 1}, {"dense_state_bytes", 1e9}}},
                {"strategies", {{{"kind", "spare"}, {"redundancy", 3}}, "checkpoint-only"}},
                {"stop", {{"steps", 100}}}};
  auto r = run_point(spare);
  CHECK(by_label(r, "spare").masked.mean == 1);
  CHECK(by_label(r, "spare").restores.mean == 0);
  CHECK(by_label(r, "checkpoint-only").restores.mean == 1);
}

TEST_CASE("checkpoint models: MoEtion loses at most 2 W steps a restore, the oracle's interval follows the MTBF") {
  // MoEtion's window from the real checkpoint policy: snapshots to host at 1 GB/s per node, so a
  // window spreads the experts' optimizer state over several iterations.
  json spec = {{"trials", 20},
               {"seed", 9},
               {"cluster", {{"nodes", 8}}},
               {"failures", {{"law", "exponential"}, {"mtbf_s", 4000}, {"repair_s", 30}}},
               {"workload", {{"layers", 2}, {"experts", 8}, {"top_k", 2}, {"tokens_per_step", 1024}}},
               {"step", {{"fixed_s", 1}, {"expert_state_bytes", 3e9}, {"expert_weight_bytes", 1e8},
                         {"dense_state_bytes", 6e8}, {"snapshot_Bps", 1e9}}},
               {"strategies", {{{"kind", "checkpoint-restart"}, {"label", "moetion"}, {"checkpoint", {{"kind", "moetion"}}}},
                               {{"kind", "checkpoint-restart"}, {"label", "dense"}, {"checkpoint", {{"kind", "dense"}, {"every", 200}}}}}},
               {"stop", {{"steps", 1000}}}};
  auto f = scenario(spec);
  REQUIRE(f.ok());
  auto s = read_scenario(f->spec, "test", ".");
  REQUIRE(s.ok());
  auto w = Workload::make(*s);
  REQUIRE(w.ok());
  auto moetion = CheckpointModel::make(s->strategies[0], *s, *w, 1.0, 0);
  REQUIRE(moetion.ok());
  int64_t window = moetion->interval();
  MESSAGE(moetion->describe());
  CHECK(window > 1);

  int64_t restores = 0, lost_moetion = 0, lost_dense = 0;
  for (int t = 0; t < s->trials; ++t) {
    auto m = run_trial(*s, 0, TrialOptions{t});
    auto d = run_trial(*s, 1, TrialOptions{t});
    REQUIRE(m.ok());
    REQUIRE(d.ok());
    CHECK(m->lost_steps <= 2 * window * m->restores);
    restores += m->restores;
    lost_moetion += m->lost_steps;
    lost_dense += d->lost_steps;
  }
  MESSAGE("restores " << restores << ", lost steps: moetion " << lost_moetion << ", dense/200 " << lost_dense);
  CHECK(restores > 0);
  CHECK(lost_moetion < lost_dense);

  // The oracle's interval from the strategy's mean time between restores: shorter when nodes fail
  // more often (Young/Daly: ∝ √MTBF when saves are cheap against the MTBF).
  auto oracle_interval = [&](double mtbf) -> int64_t {
    json o = spec;
    o["failures"]["mtbf_s"] = mtbf;
    o["step"]["dense_state_bytes"] = 1e10;
    o["strategies"] = {{{"kind", "checkpoint-restart"}, {"checkpoint", {{"kind", "oracle"}}}}};
    auto sc = read_scenario(o, "test", ".");
    REQUIRE(sc.ok());
    auto wl = Workload::make(*sc);
    REQUIRE(wl.ok());
    auto st = make_strategy(sc->strategies[0], *sc);
    REQUIRE(st.ok());
    std::vector<bool> up(sc->cluster.nodes, true);
    SimView v{*sc, sc->strategies[0], *wl, up, 0, 0};
    REQUIRE((*st)->start(v).ok());
    double mtbr = (*st)->mean_time_between_restores(v);
    CHECK(mtbr == doctest::Approx(mtbf / sc->cluster.nodes));
    auto m = CheckpointModel::make(sc->strategies[0], *sc, *wl, (*st)->step_s(v), mtbr);
    REQUIRE(m.ok());
    MESSAGE("MTBF " << mtbf << ": " << m->describe());
    return m->interval();
  };
  int64_t often = oracle_interval(3600), rarely = oracle_interval(360000);
  CHECK(often < rarely);
  CHECK(double(rarely) / double(often) > 5);   // √100 = 10, less the save time's share
  CHECK(double(rarely) / double(often) < 12);
}

TEST_CASE("scenario files run in a sandbox and read raw, and one too large to read stops at its limit") {
  auto shipped = load_scenario_file(std::string(SAL_SOURCE_DIR) + "/scripts/experiments/lazarus_jct.lua");
  REQUIRE_MESSAGE(shipped.ok(), shipped.error().message());
  CHECK(shipped->spec.is_object());
  std::string path = sal::test::temp_dir("scenario") + "/s.lua";
  auto write = [&](const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  // A metatable on the scenario is not consulted: its __index never runs.
  write("return setmetatable({ cluster = { nodes = 4 } }, { __index = function() while true do end end })");
  auto raw = load_scenario_file(path);
  if (raw) CHECK((*raw).spec["cluster"]["nodes"] == 4);
  // 64 references to one 64-entry table, four deep: 16.7 M values, stopped at the scenario's limit.
  write("local t = {} for i = 1, 64 do t[i] = i end for d = 1, 3 do local u = {} for i = 1, 64 do u[i] = t end t = u end "
        "return { cluster = t }");
  auto big = load_scenario_file(path);
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().message().find("the scenario: more than 1048576 values (a scenario's limit)") != std::string::npos);
}

TEST_CASE("goodput counts the samples kept: never below 0, and over the run it adds up to the samples trained") {
  // checkpoint-restart loses 25 committed steps at 75.5 s; 5 s buckets see the rollback whole
  json planned = small_scenario();
  planned["failures"] = {{"faults", {{{"at_s", 75.5}, {"node", 0}}}}};
  planned["strategies"] = {{{"kind", "checkpoint-restart"}, {"checkpoint", {{"kind", "dense"}, {"every", 50}}}}};
  planned["stop"] = {{"steps", 300}};
  planned["report"] = {{"bucket_s", 5}};
  auto p = run_point(planned);
  const auto& s = p.strategies.front();
  REQUIRE(s.lost_steps.mean == 25);
  double total = 0;
  for (size_t b = 0; b < s.goodput.size(); ++b) {
    CAPTURE(b);
    CHECK(s.goodput[b] >= 0);
    total += s.goodput[b] * s.bucket_s;
  }
  CHECK(total == doctest::Approx(s.samples.mean));
}

TEST_CASE("salamander sim: a policy that keeps falling back is said once, with its count at the end") {
  // a placement whose selftest passes and whose every decision for more than 3 nodes fails
  const std::string policy = temp_file("brittle.lua", R"(local deal = require "deal"
local function decide(ctx)
  if ctx.nodes > 3 then error("brittle: more than 3 nodes") end
  local layers = {}
  for l = 1, ctx.layers do layers[l] = deal.round_robin(ctx.replicas[l], ctx.nodes) end
  return { placement = layers }
end
local function selftest(t)
  local ctx = { nodes = 3, slots = 2, experts = 3, layers = 1, floor = 2, replicas = { { 2, 2, 2 } } }
  t.valid(decide(ctx), ctx)
end
return { api = 1, kind = "placement", name = "brittle", doc = "fails beyond 3 nodes", decide = decide,
         selftest = selftest }
)");
  std::string lua = "return { trials = 3, cluster = { nodes = 8, gpus_per_node = 1, slots_per_gpu = 2 },\n"
                    "  workload = { layers = 1, experts = 6, top_k = 2, tokens_per_step = 1024 },\n"
                    "  step = { fixed_s = 1 }, stop = { steps = 20 },\n"
                    "  failures = { faults = { { at_s = 5.5, node = 0 }, { at_s = 9.5, node = 1 } } },\n"
                    "  strategies = { { kind = 'salamander', placement = '" + policy + "' } } }\n";
  const std::string path = temp_file("brittle_scenario.lua", lua);
  std::string out = run("sim " + path + " --no-report --quiet");
  INFO(out);
  const size_t said = occurrences(out, "brittle: more than 3 nodes");
  CHECK(said >= 1);
  CHECK(said <= 2);  // once as it happened, once in the closing count
  CHECK(out.find("times: ") != std::string::npos);
}

TEST_CASE("salamander sim: --set of a swept field replaces the sweep, and says so") {
  const std::string path = temp_file("swept.lua",
      "return { cluster = { nodes = 8, gpus_per_node = 1, slots_per_gpu = 2 },\n"
      "  workload = { layers = 1, experts = 6, top_k = 2, tokens_per_step = 1024 },\n"
      "  step = { fixed_s = 1 }, stop = { steps = 20 }, strategies = { 'salamander' },\n"
      "  sweep = { { param = 'cluster.nodes', values = { 8, 12, 16 } } } }\n");
  std::string out = run("sim " + path + " --set cluster.nodes=10 --no-report --quiet --json");
  INFO(out);
  CHECK(out.find("--set cluster.nodes=10 replaces the scenario's sweep over cluster.nodes (8, 12, 16)") !=
        std::string::npos);
  auto j = json::parse(out.substr(out.find('{')));
  REQUIRE(j["points"].size() == 1);
  CHECK(j["points"][0]["params"]["cluster.nodes"] == 10);
}
