// test_plan_abandon.cpp — a worker leaves a plan the controller abandoned at once, whatever part of
// the switch it is in (issue: plan switches under cascading losses). Real Trainers over a real
// rendezvous store on loopback; the plan's other rank never comes, as when it died mid-switch.
//   - abandoned before the worker began it: refused at once, touching nothing;
//   - abandoned while the worker waits at its rendezvous: left within milliseconds;
//   - its rendezvous closed before the worker came (the controller closed it, the worker had not
//     heard yet): refused at once, not after the rendezvous timeout.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <thread>

#include "core/clock.h"
#include "runtime/trainer.h"
#include "runtime/trainer_fixtures.h"

using namespace sal;
using namespace sal::runtime;
using namespace std::chrono_literals;

namespace {

// Far below the data plane's rendezvous timeout (8 s): what "at once" must beat, with room for a
// loaded CI machine.
constexpr int64_t kPromptMs = 1500;

}  // namespace

TEST_CASE("a plan abandoned before the worker began it is refused at once, and nothing of it is connected") {
  Store store;
  CpuTrainer cpu;
  Trainer& t = cpu.t;
  t.abandon(3, "worker 1.0 left");
  CHECK(t.abandoned(3));
  CHECK(t.abandoned(2));
  CHECK_FALSE(t.abandoned(4));
  int64_t t0 = mono_ms();
  auto s = t.apply_plan(plan_update(3, 0, store.endpoint, 2, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("plan 3 was abandoned by the controller") != std::string::npos);
  CHECK(mono_ms() - t0 < kPromptMs);
  CHECK(store.server.key_count() == 0);  // it never came to the rendezvous
  CHECK(t.plan() == 0);
}

TEST_CASE("a worker waiting at an abandoned plan's rendezvous leaves it at once") {
  Store store;
  CpuTrainer cpu;
  Trainer& t = cpu.t;
  // rank 0 of two: rank 1 never comes, so the rendezvous waits
  auto applied = std::async(std::launch::async, [&] { return t.apply_plan(plan_update(5, 0, store.endpoint, 2, 0)); });
  REQUIRE(applied.wait_for(300ms) == std::future_status::timeout);
  int64_t abandoned_at = mono_ms();
  t.abandon(5, "worker 1.0 left");
  REQUIRE(applied.wait_for(std::chrono::milliseconds(kPromptMs)) == std::future_status::ready);
  CHECK(mono_ms() - abandoned_at < kPromptMs);
  auto s = applied.get();
  REQUIRE_FALSE(s.ok());
  CHECK(t.plan() == 0);
  // an older plan abandoned later changes nothing for a newer one
  t.abandon(4, "late word");
  t.clear_abort();
  CHECK_FALSE(t.abandoned(6));
}

TEST_CASE("a worker that comes to a plan's rendezvous after the controller closed it is refused at once") {
  Store store;
  CpuTrainer cpu;
  Trainer& t = cpu.t;
  store.server.close_prefix("plan-7/");  // the controller abandoned plan 7; this worker has not heard yet
  int64_t t0 = mono_ms();
  auto s = t.apply_plan(plan_update(7, 0, store.endpoint, 2, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("is closed") != std::string::npos);
  CHECK(mono_ms() - t0 < kPromptMs);
}
