// test_planner_hosts.cpp — the planner over hosts of several workers (issue 40): the shipped
// placements decide over workers, the planner deals their positions onto the hosts, and with room
// for every expert on two hosts, losing any one host loses no expert (P(1) over hosts = 1), where
// the positions taken in order would not; the baselines' fixed plans are left as they are.
#include <doctest/doctest.h>

#include "plan/domains.h"
#include "policy/plan_recovery.h"
#include "policy/planner.h"

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

double host_p(const plan::Plan& p, int k) {
  auto est = algo::joint_recovery_probability(host_placements_of(p), k);
  REQUIRE(est.ok());
  return est->p;
}

}  // namespace

TEST_CASE("four hosts of two workers: every shipped placement survives any one host loss") {
  for (const char* placement : {"goodput", "mro", "spread", "compact"}) {
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
