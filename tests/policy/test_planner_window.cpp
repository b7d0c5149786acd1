// test_planner_window.cpp — the sparse snapshots' window as the planner has the checkpoint policy
// size it: by the writer's copy alone (MoEtion's rule, a GPU's copy overlapping its compute), and
// with train.snapshot_cpu_share by what the slot's whole path costs the workers' CPUs, so that on
// CPU workers the window grows until a slot's path fits that share of an iteration; `moetion`
// then keeps the window while the measurements say the same.
#include <doctest/doctest.h>

#include "policy/planner.h"

using namespace sal;
using namespace sal::policy;

namespace {

PlannerConfig window_config(double cpu_share) {
  PlannerConfig cfg;
  cfg.shape.layers = 2;
  cfg.shape.experts = 8;  // d 64: 6.6 MB of full state, the experts' 6.3 of it
  cfg.slots = 4;
  cfg.min_replicas = 2;
  cfg.allocation = "lazarus";
  cfg.placement = "goodput";
  cfg.checkpoint = "moetion";
  cfg.redundancy_policy = "none";
  cfg.peer_copies = 2;
  cfg.snapshot_cpu_share = cpu_share;
  return cfg;
}

PlanAsk measured_ask() {
  PlanAsk ask;
  ask.workers = 4;
  ask.facts.iteration_s = 0.1;
  ask.facts.bandwidth_Bps = 4e9;  // the writer's copy: 400 MB an iteration, the whole model fits
  ask.facts.path_Bps = 0.5e9;     // its whole path on the writer's thread
  return ask;
}

uint32_t window_of(double cpu_share) {
  Planner planner(window_config(cpu_share), [] {});
  REQUIRE(planner.configure().ok());
  auto r = planner.decide(measured_ask());
  REQUIRE(r.ok());
  return r->plan.schedule.window;
}

}  // namespace

TEST_CASE("the writer's copy alone sizes the window (1 here), and a CPU share sizes it by the slot's whole path") {
  CHECK(window_of(0) == 1);
  // a tenth of 0.1 s at 0.5 GB/s, the whole path five times the writer's thread: 1 MB an iteration
  const uint32_t sized = window_of(0.1);
  CHECK(sized > 1);
  CHECK(window_of(1.0) == 1);  // the whole iteration: 10 MB, the whole model fits
}

TEST_CASE("moetion keeps its window while the measurements hold, and sizes it again when they change") {
  Planner planner(window_config(0.1), [] {});
  REQUIRE(planner.configure().ok());
  PlanAsk ask = measured_ask();
  auto first = planner.decide(ask);
  REQUIRE(first.ok());
  auto same = planner.decide(ask);
  REQUIRE(same.ok());
  CHECK(same->plan.schedule.window == first->plan.schedule.window);
  ask.facts.path_Bps = 50e9;  // a path a hundred times cheaper: the smallest window that fits is 1
  auto cheaper = planner.decide(ask);
  REQUIRE(cheaper.ok());
  CHECK(cheaper->plan.schedule.window == 1);
  CHECK(first->plan.schedule.window > 1);
}
