// test_plan_times.cpp — where a worker's plan switch went (runtime/plan_times.h), as its log says
// it: the text names every phase and part; and two real CPU Trainers over a rendezvous store on
// loopback, one arriving late, account the wait where it happened (the host planes' rendezvous),
// with the parts of the connection summing to it.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <thread>

#include "runtime/plan_times.h"
#include "runtime/trainer.h"
#include "runtime/trainer_fixtures.h"

using namespace sal;
using namespace sal::runtime;
using namespace std::chrono_literals;

TEST_CASE("a plan switch's phases as the worker's log says them") {
  PlanTimes t;
  t.leave_ms = 1, t.connect_ms = 9, t.planes_ms = 2, t.devices_ms = 6, t.compute_plan_ms = 1;
  t.migrate_ms = 5, t.load_ms = 3;
  CHECK(switch_phases(t) ==
        "leaving the plan in force 1.0 ms, data plane 9.0 ms (host planes 2.0, the ranks' devices 6.0, the compute's "
        "plan 1.0), moving state 5.0 ms (of which the compute's load 3.0)");
}

TEST_CASE("a rank that comes late to a plan: the others' wait is in their host planes, and the parts sum up") {
  Store store;
  CpuTrainer a, b;
  auto first = std::async(std::launch::async, [&] { return a.t.apply_plan(plan_update(2, 0, store.endpoint, 2, 0)); });
  std::this_thread::sleep_for(500ms);
  auto second = std::async(std::launch::async, [&] { return b.t.apply_plan(plan_update(2, 0, store.endpoint, 2, 1)); });
  REQUIRE(first.get().ok());
  REQUIRE(second.get().ok());
  for (const Trainer* t : {&a.t, &b.t}) {
    const PlanTimes pt = t->plan_times();
    CHECK(pt.planes_ms >= 0);
    CHECK(pt.devices_ms >= 0);
    CHECK(pt.compute_plan_ms >= 0);
    CHECK(pt.planes_ms + pt.devices_ms + pt.compute_plan_ms == doctest::Approx(pt.connect_ms).epsilon(0.01));
    CHECK(pt.load_ms <= pt.migrate_ms);
  }
  CHECK(a.t.plan_times().planes_ms >= 250);  // it waited for rank 1 at the rendezvous (500 ms, less a loaded machine's start)
  CHECK(a.t.plan_times().devices_ms < 250);  // not at the first collective
  CHECK(b.t.plan_times().planes_ms < a.t.plan_times().planes_ms);
}
