// test_driver.cpp — the job driver's transition table, row by row (driver_table.cpp): for each
// phase and event it lists, the event in and the actions out; and that an event a phase does not
// list changes nothing. The failure stories are in test_driver_stories.cpp.
#include <doctest/doctest.h>

#include "job/driver_harness.h"

using namespace sal;
using namespace sal::job;
using namespace sal::job::test;

TEST_CASE("gathering + membership: the first plan waits for every expected worker") {
  Harness h;
  h.membership(workers({0, 1, 2}));
  CHECK(h.d.phase() == Phase::gathering);
  CHECK(h.armed(Timer::gate));  // the join window starts with the first worker
  CHECK(h.all<act::DecidePlan>().empty());
  h.membership(workers({0, 1, 2, 3}));
  CHECK(h.d.phase() == Phase::planning);
  auto ask = h.all<act::DecidePlan>();
  REQUIRE(ask.size() == 1);
  CHECK(ask[0].workers == 4);
  CHECK_FALSE(ask[0].fixed_groups);
}

TEST_CASE("gathering + membership: workers that all failed to start end the job with the first failure") {
  Harness h;
  h.on(in::Membership{View{1, {}, "worker 0.0 exited with code 1: no corpus"}});
  CHECK(h.d.phase() == Phase::failed);
  CHECK(h.d.failure() == "no worker could start: worker 0.0 exited with code 1: no corpus");
  CHECK(h.all<act::StopJob>().size() == 1);
}

TEST_CASE("gathering + gate timer: the join window over, the plan goes ahead with the workers there are") {
  Harness h;
  h.membership(workers({0, 1}));
  h.membership(workers({0, 1, 2}), 4000);
  CHECK(h.d.phase() == Phase::gathering);
  CHECK_FALSE(h.armed(Timer::gate));  // the window counts from the first worker
  // the timer is the deadline, even when the monotonic clock reads a hair less as it fires
  h.timer(Timer::gate, 999);
  CHECK(h.d.phase() == Phase::planning);
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 3);
}

TEST_CASE("gathering + soon: an operator's request is looked at like a membership change") {
  Harness h;
  h.membership(workers({0, 1, 2}));
  h.on(in::PlanRequest{"job.rebalance()", true});
  CHECK(h.armed(Timer::soon));
  h.timer(Timer::soon, 5000);
  CHECK(h.d.phase() == Phase::planning);
}

TEST_CASE("planning + decided: the plan goes to its ranks, before the first commit nothing moves") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  h.decide();
  auto plans = h.sent<wire::PlanUpdate>();
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].first.to == std::vector<NodeId>{0, 1, 2, 3});
  const auto& u = plans[0].second;
  CHECK(u.plan.version == 1);
  CHECK(u.ranks.size() == 4);
  CHECK(u.transfers.empty());
  CHECK(u.step == 0);
  CHECK_FALSE(u.restore);
  CHECK(h.armed(Timer::plan));
  CHECK(h.d.pending_plan() == 1u);
}

TEST_CASE("planning + decided: a decision for workers that left meanwhile is decided again") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  uint64_t first = h.asked->decision;
  h.membership(workers({0, 1, 2}));  // node 3 left while the policies decided
  h.decide();
  CHECK(h.sent<wire::PlanUpdate>().empty());
  REQUIRE(h.asked);
  CHECK(h.asked->decision != first);
  CHECK(h.asked->workers == 3);
  // a late answer to the superseded decision is ignored
  h.on(in::Decided{first, dealt_plan(4, 99)});
  CHECK(h.out.empty());
}

TEST_CASE("planning + decided: a planner that cannot plan sends the driver back to gathering") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  h.on(in::Decided{h.asked->decision, fail("4 workers x 2 slots cannot hold 9 experts once each")});
  CHECK(h.d.phase() == Phase::gathering);
  CHECK(h.noted("plan_failed"));
}

namespace {

// Four workers whose plan the planner cannot make (too few slots), under mesh.capacity_wait_ms = `wait_ms`.
Harness cannot_plan(int64_t wait_ms) {
  DriverConfig cfg = small_job();
  cfg.capacity_wait_ms = wait_ms;
  Harness h(cfg);
  h.membership(workers({0, 1, 2, 3}));
  h.on(in::Decided{h.asked->decision, fail("4 workers x 2 slots cannot hold 9 experts once each")});
  return h;
}

}  // namespace

TEST_CASE("gathering + capacity timer: a job that cannot plan for mesh.capacity_wait_ms ends, naming why") {
  Harness h = cannot_plan(60000);
  CHECK(h.armed(Timer::capacity));
  CHECK(h.note_detail("capacity_wait").find("ends if none can be made within 60 s") != std::string::npos);
  h.asked.reset();
  h.membership(workers({0, 1, 2, 3, 4}), 20000);  // one more: still too few
  h.on(in::Decided{h.asked->decision, fail("5 workers x 2 slots cannot hold 11 experts once each")});
  CHECK_FALSE(h.armed(Timer::capacity));  // the wait goes on from its start
  h.timer(Timer::capacity, 40000);
  CHECK(h.d.phase() == Phase::failed);
  CHECK(h.d.failure().find("no plan could be made for 60 s") != std::string::npos);
  CHECK(h.d.failure().find("mesh.capacity_wait_ms") != std::string::npos);
}

TEST_CASE("gathering: with mesh.capacity_wait_ms = 0 a job that cannot plan waits for workers without end") {
  Harness h = cannot_plan(0);
  CHECK(h.noted("capacity_wait"));
  CHECK_FALSE(h.armed(Timer::capacity));
  CHECK(h.d.phase() == Phase::gathering);
}

TEST_CASE("running + every worker lost: the wait for capacity starts, said, and ends the job after mesh.capacity_wait_ms") {
  DriverConfig cfg = small_job();
  cfg.capacity_wait_ms = 30000;
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3}));
  h.membership({});  // every worker crashed; their nodes' agents may live on
  h.lose(0, "worker exited (signal 11)");  // the step aborts, and with nobody left no plan can be made
  CHECK(h.d.phase() == Phase::gathering);
  CHECK(h.note_detail("capacity_wait").find("no plan can be made (no workers left)") != std::string::npos);
  CHECK(h.armed(Timer::capacity));
  for (NodeId n : {1, 2, 3}) h.lose(n, "worker exited (signal 11)");
  CHECK(h.d.phase() == Phase::gathering);
  h.timer(Timer::capacity, 30000);
  CHECK(h.d.phase() == Phase::failed);
  CHECK(h.d.failure().find("no plan could be made for 30 s (no workers left)") != std::string::npos);
}

TEST_CASE("gathering: before any plan, no workers yet is the join wait, not a wait for capacity") {
  Harness h;
  h.membership({});
  CHECK(h.d.phase() == Phase::gathering);
  CHECK_FALSE(h.noted("capacity_wait"));
  CHECK_FALSE(h.armed(Timer::capacity));
}

TEST_CASE("planning + ready: the plan is in force when every rank answered, then the first step") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  h.decide();
  auto ranks = h.pending_ranks();
  for (size_t i = 0; i + 1 < ranks.size(); ++i) {
    h.ready(ranks[i], 1);
    CHECK(h.d.phase() == Phase::planning);
  }
  h.ready(ranks.back(), 7);  // another plan's answer counts for nothing
  CHECK(h.d.phase() == Phase::planning);
  h.ready(ranks.back(), 1);
  CHECK(h.d.phase() == Phase::running);
  CHECK(h.all<act::PlanInForce>().size() == 1);
  CHECK(h.all<act::EraseKeys>().size() == 1);
  auto begins = h.sent<wire::StepBegin>();
  REQUIRE(begins.size() == 1);
  CHECK(begins[0].second.step == 0);
  CHECK(begins[0].second.plan == 1);
}

TEST_CASE("planning + ready(not ok): the plan failed, the ranks are told, and it is tried again after a pause") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  h.decide();
  h.ready(h.pending_ranks()[0], 1, false, "rendezvous timed out");
  CHECK(h.noted("plan_failed"));
  CHECK(h.note_detail("plan_failed").find("rendezvous timed out") != std::string::npos);
  CHECK(h.sent<wire::StepAbort>().size() == 1);
  CHECK(h.armed(Timer::retry));
  CHECK_FALSE(h.d.pending_plan());
}

TEST_CASE("planning + plan timer: a switch that takes too long fails") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  h.decide();
  h.timer(Timer::plan, 60000);
  CHECK(h.note_detail("plan_failed").find("within 60000 ms") != std::string::npos);
  CHECK(h.armed(Timer::retry));
}

TEST_CASE("planning + retry timer: plan again, five failed plans in a row end the job") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  for (int i = 1; i <= 5; ++i) {
    h.decide();
    h.ready(h.pending_ranks()[0], uint64_t(i), false, "boom");
    if (i < 5) {
      REQUIRE(h.armed(Timer::retry));
      h.timer(Timer::retry, 200);
      CHECK(h.all<act::DecidePlan>().size() == 1);
    }
  }
  CHECK(h.d.phase() == Phase::failed);
  CHECK(h.d.failure().find("5 plans in a row") != std::string::npos);
}

TEST_CASE("planning + membership: a pending plan whose rank left fails at once, as a recovery, and the next is asked for at once") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  h.decide();
  h.membership(workers({0, 1, 2}));
  CHECK(h.note_detail("plan_failed").find("worker 3.0 left") != std::string::npos);
  // its ranks leave it, knowing which plan they leave; its rendezvous is closed for good
  auto aborts = h.sent<wire::StepAbort>();
  REQUIRE(aborts.size() == 1);
  CHECK(aborts[0].second.plan == 1);
  auto erased = h.all<act::EraseKeys>();
  REQUIRE(erased.size() == 1);
  CHECK(erased[0].plan == 1);
  CHECK(erased[0].closed);
  // no pause: the rank that left is out of the view already
  CHECK_FALSE(h.armed(Timer::retry));
  REQUIRE(h.all<act::DecidePlan>().size() == 1);
  CHECK(h.asked->workers == 3);
  CHECK(h.d.phase() == Phase::planning);
}

TEST_CASE("planning + soon: an operator's request while a plan is pending waits for the plan's boundary") {
  Harness h;
  h.membership(workers({0, 1, 2, 3}));
  h.decide();
  h.on(in::PlanRequest{"policy change", false});
  h.timer(Timer::soon);
  CHECK(h.d.pending_plan() == 1u);  // nothing replaced
  CHECK(h.asked->decision == 1);
  h.all_ready();  // plan 1 in force; the request is served at once: a new plan instead of step 0
  CHECK(h.all<act::PlanInForce>().size() == 1);
  CHECK(h.sent<wire::StepBegin>().empty());
  CHECK(h.d.phase() == Phase::planning);
  CHECK(h.asked->decision == 2);
}

TEST_CASE("running + soon: an operator's request is planned for with its reason, as the run record and the plan say") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.commit_step();
  h.on(in::PlanRequest{"policy change in the placement slot by an operator", false});
  h.vote({0, 0}, 1), h.vote({1, 0}, 1), h.vote({2, 0}, 1), h.vote({3, 0}, 1);
  h.timer(Timer::soon);
  REQUIRE(h.d.phase() == Phase::planning);
  auto phases = h.all<act::Phase>();
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].name == "reconfigure");
  CHECK(phases[0].detail == "policy change in the placement slot by an operator");
  h.decide();
  CHECK(h.note_detail("plan").find("(policy change in the placement slot by an operator)") != std::string::npos);
}

TEST_CASE("running + vote: the step commits when every participant voted yes, with its record") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  for (uint32_t n = 0; n < 3; ++n) {
    h.vote({n, 0}, 0);
    CHECK(h.d.steps().in_flight());
  }
  h.vote({3, 0}, 0);
  CHECK(h.sent<wire::StepCommit>().size() == 1);
  CHECK(h.sent<wire::StepCommit>()[0].first.all);
  auto done = h.all<act::StepDone>();
  REQUIRE(done.size() == 1);
  CHECK(done[0].record.step == 0);
  CHECK(done[0].record.tokens == 256);
  CHECK(done[0].record.ce == doctest::Approx(2.0));
  CHECK(done[0].record.workers == 4);
  CHECK(h.all<act::Committed>().size() == 1);
  CHECK(h.armed(Timer::soon));  // the next step at the next turn
  CHECK(h.sent<wire::StepBegin>().empty());
  h.timer(Timer::soon);
  CHECK(h.sent<wire::StepBegin>().size() == 1);
  CHECK(h.sent<wire::StepBegin>()[0].second.step == 1);
}

TEST_CASE("running + vote(no): the step aborts everywhere, and a new plan follows a pause") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.vote({0, 0}, 0, false, "NaN in the gradient");
  CHECK(h.noted("step_aborted"));
  CHECK(h.sent<wire::StepAbort>().size() == 1);
  CHECK(h.d.phase() == Phase::planning);
  CHECK(h.armed(Timer::retry));
  h.timer(Timer::retry, 50);
  CHECK(h.all<act::DecidePlan>().size() == 1);
}

TEST_CASE("a plan after committed steps names the plan in force as the one whose planes may be kept, and after an abort none") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  auto update = [&] {
    std::optional<wire::PlanUpdate> u;
    for (const auto& s : h.ever<act::Send>())
      if (auto* m = std::get_if<wire::PlanUpdate>(&s.msg)) u = *m;
    REQUIRE(u);
    return *u;
  };
  CHECK(update().keep_planes_of == 0);  // the first plan: nothing to keep
  h.commit_step();
  h.asked.reset();
  h.membership(workers({0, 1, 2, 3, 4}));
  h.commit_step();
  h.timer(Timer::join, 1000);
  h.commit_step();
  REQUIRE(h.asked);
  h.decide();
  CHECK(update().number() == 2);
  CHECK(update().keep_planes_of == 1);  // the planes of plan 1's last step are intact
  h.all_ready();
  h.vote({0, 0}, h.d.steps().next_step(), false, "NaN in the gradient");
  CHECK(h.d.steps().aborted() == 1);
  h.timer(Timer::retry, 50);
  h.decide();
  CHECK(update().number() == 3);
  CHECK(update().keep_planes_of == 0);  // the aborted step's planes are spent
}

TEST_CASE("planning after an abort: the pause ends as soon as a rank of the step is seen gone") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.asked.reset();
  h.vote({0, 0}, 0, false, "all-to-all: connection closed by rank 3");  // the loss not seen yet
  CHECK(h.armed(Timer::retry));
  CHECK_FALSE(h.asked);
  h.membership(workers({0, 1, 2, 3, 4}), 1);  // a join is not the cause: still waiting
  CHECK_FALSE(h.asked);
  h.membership(workers({0, 1, 2, 4}), 1);  // worker 3 seen gone, 2 ms in
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 4);
  bool cancelled = false;
  for (const auto& a : h.all<act::CancelTimer>()) cancelled = cancelled || a.timer == Timer::retry;
  CHECK(cancelled);
  h.timer(Timer::retry, 48);  // a late firing of the cancelled pause asks nothing more
  CHECK(h.all<act::DecidePlan>().empty());
}

TEST_CASE("running + lost after the membership already lacks it: the plan is asked with no pause") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.asked.reset();
  h.membership(workers({0, 1, 2}));  // between a kill and the step's abort
  h.lose(3);
  CHECK(h.d.steps().aborted() == 1);
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 3);
}

TEST_CASE("running + lost: a participant's loss aborts the step, a bystander's does not") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.lose(9);
  CHECK(h.d.steps().in_flight());
  h.lose(2, "connection closed (agent process exited)");
  CHECK_FALSE(h.d.steps().in_flight());
  CHECK(h.note_detail("step_aborted").find("connection closed") != std::string::npos);
}

TEST_CASE("running + membership: between steps a loss re-plans at once, a join after the join batch") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.commit_step();
  h.vote({0, 0}, 1);  // step 1 in flight: membership changes wait for the boundary
  h.membership(workers({0, 1, 2, 3, 4}));
  CHECK(h.d.steps().in_flight());
  for (uint32_t n = 1; n < 4; ++n) h.vote({n, 0}, 1);
  h.timer(Timer::soon);
  CHECK(h.armed(Timer::join));  // a join waits mesh.join_batch_ms...
  CHECK(h.sent<wire::StepBegin>().size() == 1);  // ... while training goes on
  h.timer(Timer::join, 1000);
  CHECK(h.d.steps().in_flight());  // the join timer looks between steps only
  h.commit_step();
  CHECK(h.d.phase() == Phase::planning);
  CHECK(h.asked->workers == 5);
}

TEST_CASE("running + join timer: joins that arrived while no step runs are planned when the batch is over") {
  auto cfg = small_job();
  cfg.max_steps = 0;  // an idle mesh: no steps
  Harness h(cfg);
  h.membership(workers({0, 1, 2, 3}));
  h.decide();
  h.all_ready();
  CHECK(h.d.phase() == Phase::running);
  CHECK_FALSE(h.d.steps().in_flight());
  h.membership(workers({0, 1, 2, 3, 4}));
  CHECK(h.armed(Timer::join));
  h.timer(Timer::join, 999);  // the timer is the deadline
  CHECK(h.d.phase() == Phase::planning);
}

TEST_CASE("running + soon: an operator's request is served at the next boundary, with the measured loads") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.commit_step();
  h.on(in::PlanRequest{"job.rebalance()", true});
  h.timer(Timer::soon);
  CHECK(h.d.steps().in_flight());
  h.commit_step();
  REQUIRE(h.d.phase() == Phase::planning);
  REQUIRE(h.asked->loads);
  CHECK(h.asked->loads->size() == 2);
  CHECK(h.asked->facts.iteration_s >= 0);
}

TEST_CASE("saving + membership and saved: the final checkpoint after the last step") {
  auto cfg = small_job();
  cfg.max_steps = 1;
  Harness h(cfg);
  h.start(workers({0, 1}));
  h.commit_step();
  CHECK(h.d.phase() == Phase::saving);
  auto saves = h.sent<wire::SaveCheckpoint>();
  REQUIRE(saves.size() == 1);
  CHECK(saves[0].second.dir == "/run/checkpoint");
  CHECK_FALSE(saves[0].second.snapshot);
  CHECK(h.armed(Timer::plan));
  wire::SaveDone d{0, 0, 1, true, "", 7, false, 0, 0, 0};
  h.on(in::Saved{d});
  CHECK(h.d.phase() == Phase::saving);
  d.node_id = 1, d.units = 6;
  h.on(in::Saved{d});
  CHECK(h.d.phase() == Phase::done);
  CHECK(h.note_detail("checkpoint_saved").find("13 units of step 1") != std::string::npos);
  CHECK(h.all<act::StopJob>().size() == 1);
}

TEST_CASE("saving + membership: a saver that leaves fails the job, saving + plan timer: so does a slow one") {
  auto cfg = small_job();
  cfg.max_steps = 1;
  Harness a(cfg);
  a.start(workers({0, 1}));
  a.commit_step();
  a.membership(workers({0}));
  CHECK(a.d.phase() == Phase::failed);
  CHECK(a.d.failure().find("worker 1.0 left before it had saved") != std::string::npos);
  Harness b(cfg);
  b.start(workers({0, 1}));
  b.commit_step();
  b.timer(Timer::plan, 120000);
  CHECK(b.d.phase() == Phase::failed);
  CHECK(b.d.failure().find("not every worker saved in time") != std::string::npos);
}

TEST_CASE("any + saved: a dense snapshot completes in any phase and measures the copy bandwidth") {
  auto cfg = small_job();
  cfg.checkpoint_every = 1;
  Harness h(cfg);
  h.start(workers({0, 1}));
  h.vote({0, 0}, 0);
  h.vote({1, 0}, 0);  // step 0 commits: the state of "step 1" is snapshotted
  auto snaps = h.sent<wire::SaveCheckpoint>();
  REQUIRE(snaps.size() == 1);
  CHECK(snaps[0].second.snapshot);
  CHECK(snaps[0].second.dir == "/run/snapshots/step-1");
  h.membership(workers({0, 1}));  // (an unchanged view: nothing)
  wire::SaveDone d{0, 0, 1, true, "", 7, true, 2.0, 5.0, 4'000'000, unit_names(cfg.model, 0, 7)};
  h.on(in::Saved{d});
  CHECK(h.all<act::SnapshotComplete>().empty());
  d.node_id = 1, d.units = 6, d.bytes = 2'000'000, d.written = unit_names(cfg.model, 7, 6);
  h.on(in::Saved{d});
  auto done = h.all<act::SnapshotComplete>();
  REQUIRE(done.size() == 1);
  CHECK(done[0].snapshot.step == 1);
  CHECK(h.d.checkpoint_facts().bandwidth_Bps == doctest::Approx(3e9));  // 6 MB over the slowest 2 ms copy
}

TEST_CASE("any + vote: what a worker says it holds of the sparse snapshots is kept, and a big slot's copy and path "
          "measure the bandwidths") {
  Harness h;
  h.start(workers({0, 1}));
  wire::StepVote v;
  v.node_id = 0, v.index = 0, v.epoch = h.d.steps().epoch(), v.step = 0, v.ok = true, v.tokens = 64, v.grad_norm = 1;
  v.loads.assign(2 * 4, 8);
  v.sparse_bytes = 9'000'000, v.sparse_from = 14, v.sparse_to = 20, v.sparse_copy_ms = 2.0, v.sparse_slot_bytes = 4'000'000;
  v.sparse_path_cpu_ms = 8.0;
  h.on(in::Vote{v});
  CHECK(h.d.checkpoint_facts().path_Bps == doctest::Approx(0.5e9));  // 4 MB on the writer's thread in 8 ms of CPU
  REQUIRE(h.d.sparse_holdings().count({0, 0}));
  CHECK(h.d.sparse_holdings().at({0, 0}).bytes == 9'000'000);
  CHECK(h.d.sparse_holdings().at({0, 0}).window_from == 14);
  CHECK(h.d.checkpoint_facts().bandwidth_Bps == doctest::Approx(2e9));  // 4 MB in 2 ms
  v.node_id = 1, v.sparse_copy_ms = 1.0, v.sparse_slot_bytes = 4'000'000;
  h.on(in::Vote{v});
  CHECK(h.d.checkpoint_facts().bandwidth_Bps == doctest::Approx(4e9));  // the median of 2 and 4 GB/s (the upper of two)
  v.sparse_copy_ms = 0.01, v.sparse_slot_bytes = 1000;  // too small a copy to time
  v.step = 1;
  h.on(in::Vote{v});
  CHECK(h.d.checkpoint_facts().bandwidth_Bps == doctest::Approx(4e9));
  CHECK(h.d.sparse_holdings().at({1, 0}).step == 1);
}

TEST_CASE("any + stop: the step in flight is aborted, timers cancelled, and nothing more begins") {
  Harness h;
  h.start(workers({0, 1, 2, 3}));
  h.on(in::Stop{"job.stop()"});
  CHECK(h.d.phase() == Phase::done);
  CHECK(h.sent<wire::StepAbort>().size() == 1);
  CHECK(h.all<act::CancelTimer>().size() == 4);  // gate, plan, retry, capacity
  h.membership(workers({0, 1, 2, 3, 4}));
  CHECK(h.out.empty());
  h.timer(Timer::soon);
  CHECK(h.out.empty());
}

TEST_CASE("events a phase does not list change nothing") {
  Harness h;
  h.vote({0, 0}, 0);  // gathering: no step
  CHECK(h.out.empty());
  h.ready({0, 0}, 1);
  CHECK(h.out.empty());
  h.timer(Timer::plan);
  CHECK(h.out.empty());
  h.lose(3);
  CHECK(h.out.empty());
  CHECK(Driver::handler(Phase::done, 0, std::nullopt) == nullptr);
  CHECK(Driver::handler(Phase::running, 6, Timer::gate) == nullptr);
  CHECK(Driver::handler(Phase::running, 6, Timer::join) != nullptr);
}
