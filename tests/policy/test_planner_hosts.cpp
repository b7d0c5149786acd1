// test_planner_hosts.cpp — the planner over hosts of several workers (issue 40): the shipped
// placements decide over workers, the planner deals their positions onto the hosts, and with room
// for every expert on two hosts, losing any one host loses no expert (P(1) over hosts = 1), where
// the positions taken in order would not; the baselines' fixed plans are left as they are. With
// data-parallel groups, the workers an even split leaves over join the groups computing the most
// shard types.
#include <doctest/doctest.h>

#include <fstream>

#include "plan/domains.h"
#include "policy/plan_recovery.h"
#include "policy/planner.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::policy;

namespace {

PlannerConfig host_config(const std::string& placement) {
  PlannerConfig cfg;
  cfg.shape.layers = 2;
  cfg.shape.experts = 8;
  cfg.slots = 2;
  cfg.min_replicas = 2;
  cfg.allocation = "lazarus";
  cfg.placement = placement;
  cfg.checkpoint = "moetion";
  cfg.redundancy_policy = "none";
  return cfg;
}

double joint_p(const std::vector<algo::LayerPlacement>& layers, int k) {
  auto est = algo::joint_recovery_probability(layers, k);
  REQUIRE(est.ok());
  return est->p;
}
double host_p(const plan::Plan& p, int k) { return joint_p(host_placements_of(p), k); }
double rack_p(const plan::Plan& p, int k) { return joint_p(rack_placements_of(p), k); }

}  // namespace

TEST_CASE("four hosts of two workers: every shipped placement survives any one host loss") {
  for (const char* placement : {"goodput", "stepwise", "mro", "spread", "compact"}) {
    CAPTURE(placement);
    Planner planner(host_config(placement), [] {});
    REQUIRE(planner.configure().ok());
    PlanAsk ask;
    ask.workers = 8;
    ask.domains = {0, 0, 1, 1, 2, 2, 3, 3};
    auto r = planner.decide(ask);
    REQUIRE(r.ok());
    REQUIRE(r->plan.domains.size() == 8);
    CHECK(host_count(r->plan) == 4);
    CHECK(host_p(r->plan, 1) == 1.0);
    // the same positions two by two on the hosts, as the workers come: MRO's blocks share a host
    plan::Plan in_order = r->plan;
    in_order.domains = ask.domains;
    if (std::string(placement) == "mro") CHECK(host_p(in_order, 1) < 1.0);
    // the next decision with the same hosts keeps the deal (no worker changes host for nothing)
    auto again = planner.decide(ask);
    REQUIRE(again.ok());
    if (plan::same_placement(again->plan, r->plan)) CHECK(again->plan.domains == r->plan.domains);
  }
}

TEST_CASE("one worker per host: no domains, and the baselines' fixed plans get none either") {
  Planner planner(host_config("goodput"), [] {});
  REQUIRE(planner.configure().ok());
  PlanAsk ask;
  ask.workers = 8;
  ask.domains = {0, 1, 2, 3, 4, 5, 6, 7};
  auto r = planner.decide(ask);
  REQUIRE(r.ok());
  CHECK(r->plan.domains.empty());
  ask.domains = {0, 0, 1, 1, 2, 2, 3, 3};
  ask.fixed_groups = 2;
  auto fixed = planner.decide(ask);
  REQUIRE(fixed.ok());
  CHECK(fixed->plan.domains.empty());
}

TEST_CASE("four hosts in two racks: every shipped placement survives any one rack loss, and the plan says the racks") {
  for (const char* placement : {"goodput", "mro", "spread", "compact"}) {
    CAPTURE(placement);
    Planner planner(host_config(placement), [] {});
    REQUIRE(planner.configure().ok());
    PlanAsk ask;
    ask.workers = 8;
    ask.domains = {0, 0, 1, 1, 2, 2, 3, 3};
    ask.racks = {0, 0, 1, 1};
    auto r = planner.decide(ask);
    REQUIRE(r.ok());
    CHECK(r->plan.racks == ask.racks);
    CHECK(rack_p(r->plan, 1) == 1.0);
    CHECK(host_p(r->plan, 1) == 1.0);
  }
}

TEST_CASE("racks of one-worker hosts are still dealt, and a placement sees ctx.racks (1-based, one per host)") {
  // a placement that says what it saw in its note
  std::string path = sal::test::temp_dir("racks") + "/placement.lua";
  std::ofstream(path) << "local deal = require 'deal'\n"
                         "local function decide(ctx)\n"
                         "  local layers = {}\n"
                         "  for l = 1, ctx.layers do layers[l] = deal.round_robin(ctx.replicas[l], ctx.nodes) end\n"
                         "  return { placement = layers, note = 'hosts ' .. table.concat(ctx.hosts or {}, ',') ..\n"
                         "           ' racks ' .. table.concat(ctx.racks or {}, ',') }\n"
                         "end\n"
                         "return { api = 1, kind = 'placement', name = 'saw', doc = 'round robin, saying its ctx', decide = decide }\n";
  Planner planner(host_config(path), [] {});
  REQUIRE(planner.configure().ok());
  PlanAsk ask;
  ask.workers = 8;
  ask.domains = {0, 1, 2, 3, 4, 5, 6, 7};
  ask.racks = {0, 0, 0, 0, 1, 1, 1, 1};
  auto r = planner.decide(ask);
  REQUIRE(r.ok());
  CHECK_MESSAGE(r->note.find("hosts 1,1,1,1,1,1,1,1 racks 1,1,1,1,2,2,2,2") != std::string::npos, r->note);
  CHECK(r->plan.domains.size() == 8);
  CHECK(r->plan.racks == ask.racks);
  CHECK(rack_p(r->plan, 1) == 1.0);
  // spread's round robin in order puts the two replicas of an expert on positions 4 apart at most:
  // on the hosts as they come, some expert would sit in one rack only
  plan::Plan in_order = r->plan;
  in_order.domains = ask.domains;
  CHECK(rack_p(in_order, 1) < 1.0);
}

TEST_CASE("groups: the workers an even split leaves over go to the groups that compute the most shard types") {
  PlannerConfig cfg = host_config("goodput");
  cfg.slots = 4;  // 8 experts a layer over 4 slots: a group needs two workers
  cfg.groups = 4;
  cfg.redundancy = 2;
  cfg.redundancy_policy = "spare";
  Planner planner(cfg, [] {});
  REQUIRE(planner.configure().ok());
  PlanAsk ask;
  ask.workers = 8;
  auto full = planner.decide(ask);
  REQUIRE(full.ok());
  CHECK(full->plan.groups == std::vector<uint32_t>{2, 2, 2, 2});
  // 7 workers make three groups: the fourth's shard type goes to a group hosting it, which then
  // computes two types; the seventh worker joins that group, not the first
  ask.workers = 7;
  auto r = planner.decide(ask);
  REQUIRE(r.ok());
  const auto& s = r->plan.stacks;
  REQUIRE(s.assignment.size() == 4);
  CHECK(r->plan.groups[3] == 0);
  uint32_t busiest = 0;
  for (uint32_t g = 0; g < 4; ++g)
    if (s.assignment[g].size() > s.assignment[busiest].size()) busiest = g;
  CHECK(s.assignment[busiest].size() == 2);
  CHECK(r->plan.groups[busiest] == 3);
  uint32_t total = 0;
  for (uint32_t n : r->plan.groups) total += n;
  CHECK(total == 7);
}
