// test_driver_stories.cpp — failure stories that once needed real processes, told to the job driver
// as events in and actions out: a loss during the forward pass, the all-to-all, the all-reduce and
// a state migration; losses during three successive plan switches; a plan superseded by a second loss; too few
// workers left to plan, then capacity back (the wait counted apart from the recovery); a drain fired at a commit; a batch of
// joins; a restore when every holder of an expert is lost (from a window of sparse snapshots in the
// agents' memory, from a snapshot, and from the seed; a failed restore from peers falling further);
// an operator's policy swap in the middle of a step.
#include <doctest/doctest.h>

#include <map>

#include "job/driver_harness.h"

using namespace sal;
using namespace sal::job;
using namespace sal::job::test;

namespace {

// Four workers at step `steps` (committed), step `steps` in flight.
Harness trained(uint64_t steps, DriverConfig cfg = small_job()) {
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3}));
  for (uint64_t s = 0; s < steps; ++s) h.commit_step();
  return h;
}

// After a loss: once it is seen (the membership without it), a plan for the survivors at once —
// no pause — and every rank ready. Returns the PlanUpdate.
wire::PlanUpdate recover(Harness& h, const std::vector<Participant>& survivors) {
  h.asked.reset();
  h.membership(survivors, 2);
  REQUIRE(h.armed(Timer::retry) == false);  // (armed by the abort, not by the membership change)
  REQUIRE(h.asked);
  CHECK(h.asked->workers == survivors.size());
  h.decide();
  auto plans = h.sent<wire::PlanUpdate>();
  REQUIRE(plans.size() == 1);
  h.all_ready();
  return plans[0].second;
}

}  // namespace

TEST_CASE("a node lost during the forward pass: the step aborts, the survivors re-plan and redo it") {
  Harness h = trained(5);
  h.lose(3);  // no vote yet
  CHECK(h.d.steps().aborted() == 1);
  CHECK(h.armed(Timer::retry));
  auto u = recover(h, workers({0, 1, 2}));
  CHECK(u.step == 5);  // the same step again: no committed step lost
  CHECK_FALSE(u.restore);
  for (const auto& t : u.transfers) CHECK(t.from < 3);  // state comes from surviving ranks only
  CHECK(h.d.steps().in_flight());
  CHECK(h.d.steps().next_step() == 5);
  h.commit_step();
  auto rec = h.ever<act::RecoveryDone>();
  REQUIRE(rec.size() == 1);
  CHECK(rec[0].record.kind == "elastic");
  CHECK(rec[0].record.step == 5);
  CHECK(rec[0].record.cause.find("step 5 aborted") != std::string::npos);
}

TEST_CASE("a recovery's engine time is what the next plans weigh a wipe-out and a simultaneous loss by") {
  Harness h = trained(5);
  CHECK(h.d.checkpoint_facts().replan_s == 0);  // no recovery yet: the planner assumes
  h.lose(3);
  h.asked.reset();
  h.membership(workers({0, 1, 2}), 120);  // seen gone 120 ms later
  REQUIRE(h.asked);
  h.decide();
  h.all_ready();
  h.commit_step();
  auto rec = h.ever<act::RecoveryDone>();
  REQUIRE(rec.size() == 1);
  REQUIRE(rec[0].record.seconds > 0);
  CHECK(h.d.checkpoint_facts().replan_s == doctest::Approx(rec[0].record.seconds));
  CHECK(h.d.checkpoint_facts().restore_s == 0);  // an elastic recovery is no restore
  CHECK(h.d.checkpoint_facts().restore_rerun < 0);  // nor runs steps again as one
  h.lose(2);  // the next loss: its plan is asked with what the first recovery took
  h.asked.reset();
  h.membership(workers({0, 1}), 10);
  REQUIRE(h.asked);
  CHECK(h.asked->facts.replan_s == doctest::Approx(rec[0].record.seconds));
}

TEST_CASE("a plan switch that moved experts times a replica's fetch, which the next plans are asked with") {
  Harness h = trained(5);
  CHECK(h.d.checkpoint_facts().replica_s == 0);  // the first plan moved nothing: none measured
  h.lose(2);  // workers 0 and 2 held experts 0 and 1: one of 1 and 3 must fetch both
  h.asked.reset();
  h.membership(workers({0, 1, 3}), 120);
  REQUIRE(h.asked);
  h.decide();
  auto plans = h.sent<wire::PlanUpdate>();
  REQUIRE(!plans.empty());
  std::map<uint32_t, uint64_t> per_rank;
  for (const auto& t : plans[0].second.transfers)
    if (t.kind == 3) ++per_rank[t.to];  // expert units
  std::vector<double> each;  // each receiving worker's migration (0.5 ms) over its replicas
  for (const auto& [rank, experts] : per_rank) each.push_back(0.0005 / double(experts));
  REQUIRE(!each.empty());
  std::sort(each.begin(), each.end());
  const double median = each[each.size() / 2];
  h.all_ready();  // each worker's migration took 0.5 ms
  CHECK(h.d.checkpoint_facts().replica_s == doctest::Approx(median));
  h.commit_step();
  h.lose(1);
  h.asked.reset();
  h.membership(workers({0, 3}), 10);
  if (!h.asked) h.timer(Timer::retry, 150);  // a restore waits for the windows' reports first
  REQUIRE(h.asked);
  CHECK(h.asked->facts.replica_s == doctest::Approx(median));
}

TEST_CASE("a node lost during the all-to-all: the survivors' failed collectives vote no, which counts for nothing") {
  Harness h = trained(3);
  h.lose(1, "node 1 died");
  h.vote({0, 0}, 3, false, "all-to-all: peer 1 closed the connection");
  h.vote({2, 0}, 3, false, "all-to-all: peer 1 closed the connection");
  CHECK(h.d.steps().aborted() == 1);  // one abort, not three
  CHECK(h.out.empty());
  auto u = recover(h, workers({0, 2, 3}));
  CHECK(u.step == 3);
}

TEST_CASE("a node lost during the all-reduce, after some ranks voted: nothing commits") {
  Harness h = trained(7);
  h.vote({0, 0}, 7);
  h.vote({1, 0}, 7);
  h.lose(2);
  CHECK(h.d.steps().committed() == 7);
  CHECK(h.sent<wire::StepCommit>().empty());
  CHECK(h.sent<wire::StepAbort>().size() == 1);
  h.vote({3, 0}, 7);  // late
  CHECK(h.d.steps().committed() == 7);
  auto u = recover(h, workers({0, 1, 3}));
  CHECK(u.step == 7);
}

TEST_CASE("a node lost during a state migration: the plan fails as a recovery and the next one excludes it") {
  Harness h = trained(4);
  h.lose(3);
  h.membership(workers({0, 1, 2}));
  h.timer(Timer::retry, 50);
  h.decide();
  auto ranks = h.pending_ranks();
  h.ready(ranks[0], 2);
  h.lose(2);  // mid-migration (node 0 still holds what node 2 held)
  h.membership(workers({0, 1}));
  CHECK(h.note_detail("plan_failed").find("worker 2.0 left") != std::string::npos);
  CHECK(h.sent<wire::StepAbort>().size() == 1);  // the plan's ranks stop waiting for it
  REQUIRE(h.all<act::DecidePlan>().size() == 1);  // the next plan at once, without node 2
  REQUIRE(h.asked->workers == 2);
  h.decide();
  h.all_ready();
  CHECK(h.d.phase() == Phase::running);
  CHECK(h.d.steps().next_step() == 4);
  CHECK(h.d.applied()->ranks.size() == 2);
}

TEST_CASE("nodes lost during three successive plan switches: each abandoned plan is left at once, the next asked at once, one recovery") {
  DriverConfig cfg = small_job(8);
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3, 4, 5, 6, 7}));
  for (int s = 0; s < 3; ++s) h.commit_step();
  h.lose(7);  // mid-step: the step aborts
  h.membership(workers({0, 1, 2, 3, 4, 5, 6}), 2);
  std::vector<uint32_t> alive = {0, 1, 2, 3, 4, 5, 6};
  for (uint32_t dies : {6u, 5u, 4u}) {  // each switch loses a rank on the way
    h.decide();
    const uint64_t pending = *h.d.pending_plan();
    auto ranks = h.pending_ranks();
    h.ready(ranks[0], pending);  // some ranks are already through
    alive.erase(std::find(alive.begin(), alive.end(), dies));
    h.asked.reset();
    std::vector<Participant> left;
    for (uint32_t n : alive) left.push_back({NodeId(n), 0});
    h.lose(dies);
    h.membership(left, 3);
    CAPTURE(pending);
    // the plan's ranks are told to leave that very plan; its rendezvous closed; no pause
    auto aborts = h.sent<wire::StepAbort>();
    REQUIRE(aborts.size() == 1);
    CHECK(aborts[0].second.plan == pending);
    bool closed = false;
    for (const auto& e : h.all<act::EraseKeys>()) closed = closed || (e.plan == pending && e.closed);
    CHECK(closed);
    CHECK_FALSE(h.armed(Timer::retry));
    REQUIRE(h.asked);  // the next plan at once, for the workers left
    CHECK(h.asked->workers == left.size());
  }
  h.decide();
  h.all_ready();
  REQUIRE(h.d.phase() == Phase::running);
  CHECK(h.d.applied()->ranks.size() == 4);
  CHECK(h.d.steps().next_step() == 3);  // the aborted step again: nothing committed lost
  h.commit_step();
  auto rec = h.ever<act::RecoveryDone>();
  REQUIRE(rec.size() == 1);  // one recovery, from the first loss to the commit
  CHECK(rec[0].record.cause.find("step 3 aborted") != std::string::npos);
  CHECK(rec[0].record.kind == "elastic");
}

TEST_CASE("a plan superseded by a second loss while the policies decide it") {
  Harness h = trained(2);
  h.lose(3);
  h.membership(workers({0, 1, 2}));
  h.timer(Timer::retry, 50);
  uint64_t first = h.asked->decision;
  h.lose(2);  // during the decision (the planner services the mesh)
  h.membership(workers({0, 1}));
  h.decide();  // the answer for three workers
  CHECK(h.asked->decision != first);
  CHECK(h.asked->workers == 2);
  CHECK(h.sent<wire::PlanUpdate>().empty());
  h.decide();
  h.all_ready();
  CHECK(h.d.applied()->ranks == workers({0, 1}));
  CHECK(h.d.steps().next_step() == 2);
}

TEST_CASE("a drain fired at a commit: the next step already runs without the drained node") {
  Harness h = trained(3);
  for (uint32_t n = 0; n < 4; ++n) h.vote({n, 0}, 3);
  REQUIRE(h.all<act::Committed>().size() == 1);
  REQUIRE(h.sent<wire::StepBegin>().empty());  // the next step waits for the next turn
  h.membership(workers({0, 1, 2}));            // the drill's hook drained node 3 at the commit
  CHECK(h.d.phase() == Phase::planning);
  CHECK(h.d.steps().aborted() == 0);
  h.timer(Timer::soon);  // the turn the commit asked for: planning, nothing more
  h.decide();
  h.all_ready();
  CHECK(h.d.steps().next_step() == 4);
  CHECK(h.d.steps().aborted() == 0);
}

TEST_CASE("a batch of joins is planned once, mesh.join_batch_ms after the first") {
  Harness h = trained(1);
  h.membership(workers({0, 1, 2, 3, 4}), 10);
  for (int s = 0; s < 3; ++s) {
    h.commit_step();
    if (s == 1) h.membership(workers({0, 1, 2, 3, 4, 5}), 300);
  }
  CHECK(h.d.phase() == Phase::running);  // 300 ms in: still batching
  h.commit_step();
  h.now_ns += 1'000'000'000;
  h.commit_step();
  CHECK(h.d.phase() == Phase::planning);
  CHECK(h.asked->workers == 6);
  int plans = 0;
  for (const auto& a : h.history) plans += std::holds_alternative<act::DecidePlan>(a);
  CHECK(plans == 2);  // the first plan and one for both joins
}

// The snapshot of `step` written in `write_ms`: node 0 wrote 7 of small_job()'s 13 units, node 1
// the other 6 — which completes it (the other ranks' answers, with nothing to write, would change
// nothing), so the last actions (h.all) are the completion's.
static void snapshot_written(Harness& h, uint64_t step, double write_ms) {
  for (uint32_t n = 0; n < 2; ++n) {
    auto names = n == 0 ? unit_names(small_job().model, 0, 7) : unit_names(small_job().model, 7, 6);
    h.on(in::Saved{wire::SaveDone{n, 0, step, true, "", uint32_t(names.size()), true, 1, write_ms, 100, names}});
  }
}

TEST_CASE("a snapshot written more slowly than the steps between two: warned once, with an interval that keeps up") {
  auto cfg = small_job();
  cfg.checkpoint_every = 2;
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3}));
  auto run_steps = [&](int n) {
    for (int i = 0; i < n; ++i) {
      h.now_ns += 100'000'000;  // 100 ms a step: 0.2 s between snapshots
      h.commit_step();
    }
  };
  run_steps(2);
  snapshot_written(h, 2, 150);  // kept up
  REQUIRE(h.noted("snapshot_saved"));
  CHECK_FALSE(h.noted("snapshot_slow"));
  run_steps(2);
  snapshot_written(h, 4, 460);  // 0.46 s for 0.2 s of steps
  REQUIRE(h.noted("snapshot_slow"));
  std::string why = h.note_detail("snapshot_slow");
  CHECK(why.find("step 4 took 0.5 s") != std::string::npos);
  CHECK(why.find("train.checkpoint_every = 5 or more") != std::string::npos);
  run_steps(2);
  snapshot_written(h, 6, 900);
  int warned = 0;
  for (const auto& a : h.history)
    if (auto* n = std::get_if<act::Note>(&a)) warned += n->kind == "snapshot_slow";
  CHECK(warned == 1);
}

namespace {

// Four workers, a dense snapshot every 2 steps, two steps committed: the snapshot of step 2 has
// begun on every rank.
DriverConfig snapshot_every_2() {
  auto cfg = small_job();
  cfg.checkpoint_every = 2;
  return cfg;
}

// Nodes 0 and 2, every holder of experts 0 and 1, lost; the plan that restores them asked for and
// decided over nodes 1 and 3.
void lose_holders_of_experts_0_and_1(Harness& h) {
  h.lose(0);
  h.lose(2);
  h.membership(workers({1, 3}));
  h.timer(Timer::retry, 50);
  h.decide();
}

// Four workers commit `steps` steps; after step s commits, the snapshot of step s + 1 completes when
// `snapshots` names it (each at `write_ms` = its step).
void train_with_snapshots(Harness& h, uint64_t steps, const std::set<uint64_t>& snapshots) {
  h.start(workers({0, 1, 2, 3}));
  for (uint64_t s = 0; s < steps; ++s) {
    h.commit_step();
    if (snapshots.count(s + 1)) snapshot_written(h, s + 1, double(s + 1));
  }
}

void begin_snapshot_of_step_2(Harness& h) {
  h.start(workers({0, 1, 2, 3}));
  h.commit_step();
  h.commit_step();
}

}  // namespace

TEST_CASE("a writer lost in the middle of a snapshot: the other holders' copies complete it") {
  const auto cfg = snapshot_every_2();
  Harness h(cfg);
  begin_snapshot_of_step_2(h);
  auto names = [&](size_t from, size_t n) { return unit_names(cfg.model, from, n); };
  h.on(in::Saved{wire::SaveDone{0, 0, 2, true, "", 7, true, 1, 5, 100, names(0, 7)}});
  h.lose(1);  // wrote units 7-12 (it would have answered now)
  h.membership(workers({0, 2, 3}));
  CHECK_FALSE(h.noted("snapshot_dropped"));  // ranks 2 and 3 hold second copies, still writing
  h.on(in::Saved{wire::SaveDone{2, 0, 2, true, "", 4, true, 1, 5, 100, names(5, 4)}});
  CHECK(h.all<act::SnapshotComplete>().empty());  // units 9-12 not yet
  h.on(in::Saved{wire::SaveDone{3, 0, 2, true, "", 6, true, 1, 5, 100, names(7, 6)}});
  auto done = h.all<act::SnapshotComplete>();
  REQUIRE(done.size() == 1);
  CHECK(done[0].snapshot.step == 2);
  CHECK(done[0].snapshot.units == 13);
}

TEST_CASE("a snapshot whose missing units have no writer left is dropped, and said so") {
  const auto cfg = snapshot_every_2();
  Harness h(cfg);
  begin_snapshot_of_step_2(h);
  h.on(in::Saved{wire::SaveDone{0, 0, 2, true, "", 7, true, 1, 5, 100, unit_names(cfg.model, 0, 7)}});
  h.on(in::Saved{wire::SaveDone{2, 0, 2, true, "", 0, true, 1, 5, 100, {}}});
  h.on(in::Saved{wire::SaveDone{3, 0, 2, true, "", 0, true, 1, 5, 100, {}}});
  h.lose(1);
  h.membership(workers({0, 2, 3}));
  REQUIRE(h.noted("snapshot_dropped"));
  CHECK(h.note_detail("snapshot_dropped").find("step 2") != std::string::npos);
}

TEST_CASE("every holder of an expert lost: restore the newest complete snapshot, redo the steps after it") {
  auto cfg = small_job();
  cfg.checkpoint_every = 2;
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3}));
  for (uint64_t s = 0; s < 5; ++s) {
    h.commit_step();
    if (s == 1) {  // the snapshot of step 2 completes
      snapshot_written(h, 2, 2);
      REQUIRE(h.all<act::SnapshotComplete>().size() == 1);
    }
  }
  REQUIRE(h.d.steps().committed() == 5);
  lose_holders_of_experts_0_and_1(h);
  CHECK(h.noted("restore_begun"));
  CHECK(h.note_detail("restore_begun").find("every copy lost: layer 0 expert 0") != std::string::npos);
  auto lost = h.all<act::StepsLost>();
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].steps == 3);  // steps 2, 3, 4 run again
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore);
  CHECK(u[0].second.restore_dir == "/run/snapshots/step-2");
  CHECK(u[0].second.step == 2);
  CHECK(u[0].second.transfers.empty());
  CHECK_FALSE(u[0].second.relaunch);  // elastic restores are in place
  h.all_ready();
  CHECK(h.noted("restored"));
  CHECK(h.d.steps().next_step() == 2);
  h.commit_step();
  bool restore_recovery = false;
  for (const auto& a : h.history)
    if (auto* r = std::get_if<act::RecoveryDone>(&a)) restore_recovery = r->record.kind == "restore";
  CHECK(restore_recovery);
}

TEST_CASE("a snapshot that completes after a rollback is ahead of the committed steps: restored, training goes on from it, nothing counted twice") {
  auto cfg = small_job();
  cfg.checkpoint_every = 2;
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3}));
  const auto& shape = small_job().model;
  for (uint64_t s = 0; s < 5; ++s) {
    h.commit_step();
    if (s == 1) snapshot_written(h, 2, 2);  // the snapshot of step 2 completes
    if (s == 3)  // step 4's: node 0 wrote its share, node 1 is still writing
      h.on(in::Saved{wire::SaveDone{0, 0, 4, true, "", 7, true, 1, 2, 100, unit_names(shape, 0, 7)}});
  }
  lose_holders_of_experts_0_and_1(h);  // every holder of experts 0 and 1: back to the snapshot of step 2
  h.all_ready();
  REQUIRE(h.d.steps().next_step() == 2);
  // node 1's share of the snapshot of step 4 is written now: that snapshot, of a state the job
  // reached before it rolled back, completes
  h.on(in::Saved{wire::SaveDone{1, 0, 4, true, "", 6, true, 1, 2, 100, unit_names(shape, 7, 6)}});
  REQUIRE(h.all<act::SnapshotComplete>().size() == 1);
  h.commit_step();  // step 2: 3 steps committed, the newest snapshot is of step 4
  h.lose(1);        // node 1 held experts 0 and 1 alone; two nodes join
  h.membership(workers({3, 4, 5}));
  h.timer(Timer::retry, 50);
  h.decide();
  std::string said = h.note_detail("restore_begun");
  CHECK(said.find("the snapshot of step 4") != std::string::npos);
  CHECK(said.find("it is ahead of the 3 committed steps") != std::string::npos);
  CHECK(said.find("training goes on from step 4, no step runs again") != std::string::npos);
  auto lost = h.all<act::StepsLost>();
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].steps == 0);  // nothing runs again (it was no underflow to 2^64 - 1)
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_dir == "/run/snapshots/step-4");
  CHECK(u[0].second.step == 4);
  h.all_ready();
  CHECK(h.d.steps().next_step() == 4);  // the state the workers hold now
}

TEST_CASE("a snapshot a restore finds damaged is no longer restored from: the next restore takes the one before it") {
  Harness h(snapshot_every_2());
  train_with_snapshots(h, 5, {2, 4});
  REQUIRE(h.ever<act::SnapshotComplete>().size() == 2);
  lose_holders_of_experts_0_and_1(h);
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  REQUIRE(u[0].second.restore_dir == "/run/snapshots/step-4");
  const uint64_t plan = u[0].second.number();
  h.ready(h.pending_ranks()[0], plan, false,
          "restoring plan " + std::to_string(plan) + ": /run/snapshots/step-4/embedding.bin: damaged: its values do not "
          "match the digest written with them (bits changed on disk)", true);
  REQUIRE(h.noted("snapshot_damaged"));
  CHECK(h.note_detail("snapshot_damaged").find("the next restore takes the snapshot of step 2") != std::string::npos);
  bool dropped = false;  // a resumed controller does not take it either
  for (const auto& j : h.all<act::Journal>())
    if (const auto* x = std::get_if<rec::SnapshotDrop>(&j.record)) dropped = x->dir == "/run/snapshots/step-4";
  CHECK(dropped);
  h.timer(Timer::retry, 500);
  h.decide();
  u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_dir == "/run/snapshots/step-2");
  CHECK(u[0].second.step == 2);
  // a failure that is not the snapshot's (a worker's own trouble) forgets nothing, whatever it names
  h.ready(h.pending_ranks()[0], u[0].second.number(), false,
          "restoring: out of memory while reading /run/snapshots/step-2/embedding.bin");
  CHECK_FALSE(h.noted("snapshot_damaged"));
  h.timer(Timer::retry, 1000);
  h.decide();
  u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_dir == "/run/snapshots/step-2");
}

TEST_CASE("every holder of an expert lost before any snapshot: the seed, and every committed step again") {
  Harness h = trained(3);
  lose_holders_of_experts_0_and_1(h);
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore);
  CHECK(u[0].second.restore_dir.empty());
  CHECK(u[0].second.step == 0);
  CHECK(h.all<act::StepsLost>()[0].steps == 3);
}

TEST_CASE("a baseline's restore relaunches its workers where train.restart says so, and says it") {
  for (bool relaunch : {true, false}) {
    CAPTURE(relaunch);
    auto cfg = small_job();
    cfg.recovery = "checkpoint-restart";
    cfg.relaunch = relaunch;
    Harness h(cfg);
    h.start(workers({0, 1, 2, 3}));
    h.commit_step();
    h.commit_step();
    h.lose(3);  // the workers in use change: checkpoint-restart restores (the seed: no snapshot)
    h.membership(workers({0, 1, 2}));
    h.timer(Timer::retry, 50);
    h.decide();
    auto u = h.sent<wire::PlanUpdate>();
    REQUIRE(u.size() == 1);
    CHECK(u[0].first.to.size() == 2);  // one whole group of two
    CHECK(u[0].second.restore);
    CHECK(u[0].second.relaunch == relaunch);
    CHECK((h.note_detail("restore_begun").find("relaunched first") != std::string::npos) == relaunch);
    h.all_ready();
    CHECK(h.d.steps().next_step() == 0);
  }
}

TEST_CASE("a restore whose plan is abandoned is owed: the next plan restores again, even over the workers of the plan in force") {
  auto cfg = small_job(6);
  cfg.recovery = "checkpoint-restart";
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3}));  // two whole groups of two
  h.commit_step();
  h.commit_step();
  h.asked.reset();
  h.membership(workers({0, 1, 2, 3, 4, 5}));  // a third group joins: checkpoint-restart restores
  h.commit_step();
  h.timer(Timer::join, 1000);
  h.commit_step();
  REQUIRE(h.asked);
  h.decide();
  REQUIRE(h.noted("restore_begun"));
  REQUIRE(h.d.pending_plan());
  h.lose(5);  // the restore's plan is abandoned; the workers left are those of the plan in force
  h.membership(workers({0, 1, 2, 3, 4}));
  CHECK(h.noted("plan_failed"));
  h.timer(Timer::retry, 50);
  h.decide();
  // they may hold the state of before the restore, part of the snapshot's, or (relaunched) none:
  // the same restore again, not a switch that moves their state
  std::string said = h.note_detail("restore_begun");
  CHECK(said.find("the restore of plan 2 was not completed") != std::string::npos);
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore);
  CHECK(u[0].second.transfers.empty());
  h.all_ready();
  CHECK(h.d.steps().next_step() == 0);
  h.commit_step();
  // a plan in force pays the debt: the next change of workers is the mode's own decision again
  h.asked.reset();
  h.membership(workers({0, 1, 2, 3, 4}));
  CHECK_FALSE(h.asked);
}

TEST_CASE("a policy swapped in the middle of a step: the step commits, the new plan follows at the boundary") {
  Harness h = trained(2);
  h.vote({0, 0}, 2);
  h.on(in::PlanRequest{"policy change in the placement slot", false});
  h.timer(Timer::soon);
  CHECK(h.d.steps().in_flight());
  for (uint32_t n = 1; n < 4; ++n) h.vote({n, 0}, 2);
  CHECK(h.d.steps().committed() == 3);
  h.timer(Timer::soon);
  CHECK(h.d.phase() == Phase::planning);
  CHECK(h.d.steps().aborted() == 0);
  h.decide();
  // the harness's planner deals the same placement: the plan in force stays, training goes on
  CHECK(h.noted("plan_kept"));
  CHECK(h.d.steps().in_flight());
  CHECK(h.d.steps().next_step() == 3);
}

TEST_CASE("a step failing three times in a row with the same workers ends the job") {
  Harness h = trained(1);
  for (int i = 0; i < 3; ++i) {
    h.vote({0, 0}, 1, false, "out of memory");
    h.timer(Timer::retry, 50);
    if (i < 2) {
      h.decide();
      // the same placement, but the aborted step's data plane is spent: switched to all the same
      CHECK_FALSE(h.noted("plan_kept"));
      REQUIRE(h.sent<wire::PlanUpdate>().size() == 1);
      h.all_ready();
    }
  }
  CHECK(h.d.phase() == Phase::failed);
  CHECK(h.d.failure().find("failed 3 times in a row") != std::string::npos);
}

namespace {

// What a controller that died after committing 6 steps of plan 3 on nodes 0..3 left in its journal.
JournalState died_at(uint64_t committed) {
  JournalState j;
  j.job = rec::Job{"t", "job.lua", "/", "", "tcp://127.0.0.1:5000", 100};
  j.epoch = 9;
  auto rec = dealt_plan(4, 3);
  j.plan = AppliedPlan{workers({0, 1, 2, 3}), rec.plan, 2};
  j.committed = committed;
  j.commit_epoch = 8;
  return j;
}

// The agents register again (keeping their ids) and report what their workers hold.
void come_back(Harness& h, const std::map<Participant, Holding>& held) {
  std::vector<Participant> ready;
  for (const auto& [p, x] : held) ready.push_back(p);
  h.on(in::Membership{View{++h.epoch + 9, ready, "", held}});
}

}  // namespace

TEST_CASE("a restarted controller: every rank back with the committed state, the plan is put in force again") {
  Harness h(small_job(), died_at(6));
  CHECK(h.d.wants_holdings());
  CHECK(h.d.steps().committed() == 6);
  std::map<Participant, Holding> held;
  for (uint32_t n = 0; n < 4; ++n) held[{n, 0}] = Holding{3, 6, std::nullopt, 0};
  come_back(h, held);
  CHECK_FALSE(h.d.wants_holdings());
  CHECK(h.noted("resumed"));
  CHECK(h.sent<wire::StepAbort>().size() == 1);  // whatever was in flight is discarded
  REQUIRE(h.asked);
  REQUIRE(h.asked->keep);  // nothing to decide: the same plan again
  CHECK(h.asked->keep->layers[0].placement == died_at(6).plan->plan.layers[0].placement);
  h.on(in::Decided{h.asked->decision, dealt_plan(4, 4)});
  auto plans = h.sent<wire::PlanUpdate>();
  REQUIRE(plans.size() == 1);  // switched to, though the placement is the same: the data plane is new
  CHECK(plans[0].second.step == 6);
  CHECK(plans[0].second.transfers.empty());
  h.all_ready();
  CHECK(h.d.steps().next_step() == 6);
  CHECK(h.d.steps().in_flight());
}

TEST_CASE("a restarted controller: a rank that missed the last commit applies it, one further behind starts anew") {
  Harness h(small_job(), died_at(6));
  std::map<Participant, Holding> held;
  held[{0, 0}] = Holding{3, 6, std::nullopt, 0};
  held[{1, 0}] = Holding{3, 5, 5, 8};             // voted for step 5, never heard its commit
  held[{2, 0}] = Holding{3, 6, 6, 9};             // computed step 6, never committed: discarded
  held[{3, 0}] = Holding{3, 4, std::nullopt, 0};  // cannot be trusted with the committed state
  come_back(h, held);
  auto commits = h.sent<wire::StepCommit>();
  REQUIRE(commits.size() == 1);
  CHECK(commits[0].first.to == std::vector<NodeId>{1});
  CHECK(commits[0].second.step == 5);
  CHECK(commits[0].second.epoch == 8);
  size_t commit_at = 0, abort_at = 0;
  for (size_t i = 0; i < h.out.size(); ++i)
    if (auto* s = std::get_if<act::Send>(&h.out[i])) {
      if (std::holds_alternative<wire::StepCommit>(s->msg)) commit_at = i;
      if (std::holds_alternative<wire::StepAbort>(s->msg)) abort_at = i;
    }
  CHECK(commit_at < abort_at);  // the late commit before the abort, on the same connection
  REQUIRE(h.asked);
  CHECK_FALSE(h.asked->keep);  // node 3 holds no usable state: a plan that moves state to it
  h.decide();
  auto plans = h.sent<wire::PlanUpdate>();
  REQUIRE(plans.size() == 1);
  bool to_node3 = false;
  for (const auto& t : plans[0].second.transfers) to_node3 = to_node3 || plans[0].second.ranks[t.to].node == 3;
  CHECK(to_node3);
  CHECK(plans[0].second.step == 6);
}

TEST_CASE("a restarted controller: a rank that does not come back within the join window is a loss") {
  Harness h(small_job(), died_at(6));
  std::map<Participant, Holding> held;
  for (uint32_t n = 0; n < 3; ++n) held[{n, 0}] = Holding{3, 6, std::nullopt, 0};
  come_back(h, held);
  CHECK(h.d.wants_holdings());  // waiting for node 3
  CHECK(h.armed(Timer::gate));
  h.timer(Timer::gate, 5000);
  CHECK_FALSE(h.d.wants_holdings());
  REQUIRE(h.asked);
  CHECK_FALSE(h.asked->keep);
  CHECK(h.asked->workers == 3);
  h.decide();
  h.all_ready();
  CHECK(h.d.steps().next_step() == 6);  // node 3's experts had other holders: elastic, nothing lost
  h.commit_step();
  bool recovered = false;
  for (const auto& a : h.history)
    if (auto* r = std::get_if<act::RecoveryDone>(&a)) recovered = r->record.cause == "the controller restarted";
  CHECK(recovered);
}

TEST_CASE("a job resumed from a checkpoint: its first plan restores every unit from it and steps go on from there") {
  DriverConfig c = small_job();
  c.resume_from = ResumeFrom{"/old/checkpoint", 40};
  Harness h(c);
  h.membership(workers({0, 1, 2, 3}));
  if (!h.asked) h.timer(Timer::gate, 5000);
  REQUIRE(h.asked);
  h.decide();
  auto updates = h.sent<wire::PlanUpdate>();
  REQUIRE(updates.size() == 1);  // one message to the plan's ranks
  CHECK(h.pending_ranks().size() == 4);
  for (const auto& [send, u] : updates) {
    CHECK(u.restore);
    CHECK(u.restore_dir == "/old/checkpoint");
    CHECK(u.step == 40);
    CHECK(u.transfers.empty());
  }
  CHECK(h.noted("resume_begun"));
  h.all_ready();
  REQUIRE(h.d.phase() == Phase::running);
  CHECK(h.d.steps().next_step() == 40);
  h.commit_step();
  CHECK(h.d.steps().committed() == 41);
  // a later plan (a loss) moves state as usual: the checkpoint was only for the start
  h.lose(3);
  auto u = recover(h, workers({0, 1, 2}));
  CHECK_FALSE(u.restore);
  CHECK(u.step == 41);
}

TEST_CASE("a stop saves the final checkpoint, and a saver lost meanwhile makes the others write it again at once") {
  Harness h = trained(3);
  h.on(in::Stop{"job.stop() by test", true});
  CHECK(h.d.phase() == Phase::saving);
  CHECK(h.d.steps().aborted() == 1);  // the step in flight
  auto saves = h.sent<wire::SaveCheckpoint>();
  REQUIRE(saves.size() == 1);
  CHECK(saves[0].second.step == 3);
  CHECK_FALSE(saves[0].second.snapshot);
  // worker 1 answers; then worker 3 dies before answering: no waiting for the save's timeout —
  // the three left write it again, rank 3 absent (its units written by their other holders)
  h.on(in::Saved{wire::SaveDone{1, 0, 3, true, "", 5, false, 0, 0, 0}});
  h.out.clear();
  h.membership(workers({0, 1, 2}));
  CHECK(h.d.phase() == Phase::saving);
  CHECK(h.note_detail("checkpoint_retry").find("worker 3.0 left before it had saved") == 0);
  auto again = h.sent<wire::SaveCheckpoint>();
  REQUIRE(again.size() == 1);
  CHECK(again[0].first.to == std::vector<NodeId>{0, 1, 2});
  CHECK(again[0].second.absent == std::vector<uint32_t>{3});
  // answers to the first try (0 and 2 had not answered it) are not this try's
  h.on(in::Saved{wire::SaveDone{0, 0, 3, true, "", 5, false, 0, 0, 0}});
  h.on(in::Saved{wire::SaveDone{2, 0, 3, true, "", 5, false, 0, 0, 0}});
  h.on(in::Saved{wire::SaveDone{1, 0, 3, true, "", 6, false, 0, 0, 0}});
  h.on(in::Saved{wire::SaveDone{0, 0, 3, true, "", 6, false, 0, 0, 0}});
  CHECK(h.d.phase() == Phase::saving);
  h.on(in::Saved{wire::SaveDone{2, 0, 3, true, "", 6, false, 0, 0, 0}});
  CHECK(h.d.phase() == Phase::done);
  CHECK(h.note_detail("checkpoint_saved").find("18 units of step 3") == 0);
  CHECK_FALSE(h.d.checkpoint_dir().empty());
}

TEST_CASE("a final checkpoint whose savers keep dying is given up after three tries, naming the newest snapshot") {
  Harness h(snapshot_every_2());
  train_with_snapshots(h, 5, {2, 4});
  h.on(in::Stop{"job.stop() by test", true});
  h.membership(workers({0, 1, 2}));
  h.membership(workers({0, 1}));
  CHECK(h.d.phase() == Phase::saving);
  h.membership(workers({0}));
  CHECK(h.d.phase() == Phase::done);
  CHECK(h.d.failure().empty());
  CHECK(h.noted("checkpoint_failed"));
  CHECK(h.d.checkpoint_dir().empty());
  std::string why;
  for (const auto& a : h.out)
    if (auto* s = std::get_if<act::StopJob>(&a)) why = s->why;
  CHECK(why.find("stopped after 5 steps: job.stop() by test (the final checkpoint was not written: worker 1.0 left "
                 "before it had saved (after 3 tries); the newest dense snapshot, of step 4, is in "
                 "/run/snapshots/step-4)") == 0);
}

TEST_CASE("a stop with every saver answering writes the checkpoint's manifest, then stops the job") {
  Harness h = trained(2);
  h.on(in::Stop{"interrupted", true});
  auto saves = h.sent<wire::SaveCheckpoint>();
  REQUIRE(saves.size() == 1);
  for (const auto& p : h.d.applied()->ranks) {
    wire::SaveDone d{p.node, p.index, 2, true, "", 3, false, 0, 0, 0};
    h.on(in::Saved{d});
  }
  CHECK(h.d.phase() == Phase::done);
  std::vector<act::CheckpointComplete> done = h.all<act::CheckpointComplete>();
  REQUIRE(done.size() == 1);
  CHECK(done[0].step == 2);
  CHECK(done[0].units == 12);
}

TEST_CASE("a stop before any step commits saves nothing and stops at once") {
  Harness h;
  h.on(in::Stop{"interrupted", true});
  CHECK(h.sent<wire::SaveCheckpoint>().empty());
  bool stop = false;
  for (const auto& a : h.out) stop |= std::holds_alternative<act::StopJob>(a);
  CHECK(stop);
}

TEST_CASE("every holder of an expert lost, a sparse window in the agents' memory: restore from peers, replay, nothing lost") {
  Harness h = trained(6);
  h.slices(1, 4, 5, 0, 7);  // window 4..5: node 1 holds the first 7 units, node 3 the other 6
  h.slices(3, 4, 5, 7, 6);
  h.slices(0, 4, 5, 0, 13);  // the dead node's report does not count
  h.lose(0);
  h.lose(2);
  h.membership(workers({1, 3, 4, 5}));
  h.timer(Timer::retry, 50);
  h.decide();
  CHECK(h.note_detail("restore_begun").find("the sparse window of iterations 4..5 held by 2 nodes") != std::string::npos);
  CHECK(h.note_detail("restore_begun").find("no committed step is lost") != std::string::npos);
  CHECK(h.all<act::StepsLost>().empty());
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  const auto& p = u[0].second;
  CHECK(p.restore);
  CHECK(p.restore_window == 4);
  CHECK(p.step == 5);  // slot 0 holds the state after iteration 4
  REQUIRE(p.restore_holders.size() == 2);
  CHECK(p.restore_holders[0].node == 1);
  CHECK(p.restore_holders[0].units.size() == 7);
  CHECK(p.restore_holders[1].node == 3);
  CHECK(p.slice_nodes.size() == 4);  // every live node's endpoint
  CHECK(p.slice_peers.size() == 4);  // by rank
  CHECK(p.slice_budget == small_job().peer_memory);
  h.all_ready();
  CHECK(h.note_detail("restored").find("sparse window") != std::string::npos);
  CHECK(h.d.steps().next_step() == 5);
  // the replay runs to iteration 5: a join waits for it to end
  h.membership(workers({1, 3, 4, 5, 6}));
  h.commit_step();  // 5
  CHECK_FALSE(h.d.pending_plan());
  h.timer(Timer::join, 2000);
  CHECK_FALSE(h.d.pending_plan());
  bool peers = false;
  for (const auto& a : h.history)
    if (auto* r = std::get_if<act::RecoveryDone>(&a)) peers = r->record.source == "peers" && r->record.rerun == 1;
  CHECK(peers);
  // the next plans weigh a wipe-out by the steps this job's restores ran again: 1 here
  CHECK(h.d.checkpoint_facts().restore_rerun == doctest::Approx(1));
  h.asked.reset();
  h.commit_step();  // 6: replayed; the join's batch starts now
  h.timer(Timer::join, 1100);
  CHECK(h.asked);
}

TEST_CASE("a restore from peers that fails falls to the dense snapshot, and the steps it would have replayed are lost") {
  Harness h(snapshot_every_2());
  train_with_snapshots(h, 6, {2});
  h.slices(1, 4, 5, 0, 13);
  lose_holders_of_experts_0_and_1(h);
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);
  wire::PlanReady bad{1, 0, *h.d.pending_plan(), false, "layer0.dense: no good copy in the window from iteration 4", 1, 0, 0,
                      {"layer0.dense from the window from iteration 4: node 1: its copy fails its checksum; asking node 3"}};
  h.on(in::Ready{bad});
  CHECK(h.noted("slice_fallback"));
  CHECK(h.note_detail("sparse_restore_failed").find("falling back to the dense snapshot on disk") != std::string::npos);
  h.timer(Timer::retry, 500);
  h.decide();
  u = h.sent<wire::PlanUpdate>();  // (this decision's)
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == -1);  // the failed window is not tried again
  CHECK(u[0].second.restore_dir == "/run/snapshots/step-2");
  uint64_t lost = 0;
  for (const auto& a : h.history)
    if (auto* l = std::get_if<act::StepsLost>(&a)) lost += l->steps;
  CHECK(lost == 6 - 2);
}

TEST_CASE("a restore from peers that fails on a window its holders no longer keep takes the newer one they report since") {
  Harness h = trained(6);
  h.slices(1, 2, 2, 0, 13);  // what node 1 had said when the loss came (its agent has moved on since)
  lose_holders_of_experts_0_and_1(h);
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 2);
  CHECK(h.d.steps().next_step() == 3);  // rewound to the window
  h.slices(1, 4, 4, 0, 13);             // its report now: window 4..4, which the job had reached
  wire::PlanReady bad{1, 0, *h.d.pending_plan(), false,
                      "layer0.dense: no good copy in the window from iteration 2 (tried: node 1: 13 units not held in "
                      "a complete window from iteration 2)", 1, 0, 0, {}};
  h.on(in::Ready{bad});
  CHECK(h.noted("sparse_restore_failed"));
  // the next window is tried once the reports have settled, not after the doubling pause
  bool settle = false;
  for (const auto& a : h.all<act::ArmTimer>()) settle = settle || (a.timer == Timer::retry && a.ms == 150);
  CHECK(settle);
  h.timer(Timer::retry, 150);
  h.decide();
  u = h.sent<wire::PlanUpdate>();  // (this decision's)
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);  // past the rewind's step 3, before the 6 steps committed
  CHECK(u[0].second.step == 5);
  h.all_ready();
  uint64_t lost = 0;
  for (const auto& a : h.history)
    if (auto* l = std::get_if<act::StepsLost>(&a)) lost += l->steps;
  CHECK(lost == 0);
  CHECK(h.d.steps().next_step() == 5);
}

TEST_CASE("a loss whose newest window in the reports is older than the agents keep waits for their reports, and restores the newer window with no failed try") {
  Harness h = trained(6);
  h.slices(1, 2, 2, 0, 13);  // said at step 2: with windows of one iteration its agent keeps 4 and 5 by now
  h.lose(0);
  h.lose(2);
  h.asked.reset();
  h.membership(workers({1, 3}));
  CHECK_FALSE(h.asked);  // a plan now would restore window 2, which is likely gone
  bool settle = false;
  for (const auto& a : h.all<act::ArmTimer>()) settle = settle || (a.timer == Timer::retry && a.ms == 150);
  CHECK(settle);
  h.slices(1, 4, 4, 0, 13);  // its report since
  h.timer(Timer::retry, 150);
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);
  h.all_ready();
  CHECK_FALSE(h.noted("sparse_restore_failed"));
  CHECK(h.d.steps().next_step() == 5);
}

TEST_CASE("a loss whose window in the reports is among those the agents keep restores it at once") {
  Harness h = trained(6);
  h.slices(1, 4, 4, 0, 13);
  h.lose(0);
  h.lose(2);
  h.asked.reset();
  h.membership(workers({1, 3}));
  REQUIRE(h.asked);  // no wait
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);
}

TEST_CASE("a loss that would restore from the seed waits for the agents' reports of their windows, and one that serves is taken") {
  Harness h = trained(6);  // no window reported yet: the reports come at most every 100 ms
  h.lose(0);
  h.lose(2);
  h.asked.reset();
  h.membership(workers({1, 3}));
  CHECK_FALSE(h.asked);  // the cause is seen, but a plan now would restore the seed
  CHECK(h.armed(Timer::retry));
  h.slices(1, 4, 5, 0, 7);  // the reports arrive: window 4..5 held whole by nodes 1 and 3
  CHECK_FALSE(h.asked);  // half of it: still waiting
  h.slices(3, 4, 5, 7, 6);
  CHECK(h.asked);  // the pause ends with the report that makes a window serve, not after 150 ms
  CHECK_FALSE(h.armed(Timer::retry));
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);
  CHECK(h.note_detail("restore_begun").find("the sparse window of iterations 4..5") != std::string::npos);
}

TEST_CASE("with no sparse snapshots in peers a restore from the seed does not wait for reports") {
  auto cfg = small_job();
  cfg.peer_copies = 0;
  Harness h = trained(6, cfg);
  h.lose(0);
  h.lose(2);
  h.asked.reset();
  h.membership(workers({1, 3}));
  CHECK(h.asked);
}

TEST_CASE("a sparse window that restores no newer state than the dense snapshots is not taken, and is taken "
          "again when it does") {
  auto cfg = small_job();
  cfg.checkpoint_every = 5;  // a restore from them runs 2 steps again on average
  Harness h(cfg);
  h.membership(workers({0, 1, 2, 3}));
  if (!h.asked) h.timer(Timer::gate, 5000);
  REQUIRE(h.asked);
  PlanRecord two = dealt_plan(4, 1);
  two.plan.schedule = {2, 2, {{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11, 12}}};  // 2.5 steps
  h.on(in::Decided{h.asked->decision, two});
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.slice_peers.empty());  // no rank takes a slot
  CHECK(u[0].second.slice_nodes.size() == 4);
  CHECK(h.note_detail("sparse_snapshots").find("no sparse snapshots taken: a restore from its window of 2 (period "
                                               "2) would run 2.5 steps again on average") != std::string::npos);
  CHECK(h.d.sparse_off().find("dense snapshots every 5 steps 2.0") != std::string::npos);
  h.all_ready();
  // a window of 1 (1 step) is taken again: every rank has its peers
  h.asked.reset();
  h.membership(workers({0, 1, 2, 3, 4}));
  h.commit_step();
  h.timer(Timer::join, 2000);
  h.commit_step();  // the join timer looks between steps
  REQUIRE(h.asked);
  h.decide();
  u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.slice_peers.size() == 5);
  CHECK(h.note_detail("sparse_snapshots").find("sparse snapshots taken again (window 1)") != std::string::npos);
  CHECK(h.d.sparse_off().empty());
}

TEST_CASE("while the plan in force takes no sparse snapshots, a restore does not wait for the agents' reports") {
  auto cfg = small_job();
  cfg.checkpoint_every = 5;
  Harness h(cfg);
  h.membership(workers({0, 1, 2, 3}));
  if (!h.asked) h.timer(Timer::gate, 5000);
  REQUIRE(h.asked);
  PlanRecord two = dealt_plan(4, 1);
  two.plan.schedule = {2, 2, {{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11, 12}}};
  h.on(in::Decided{h.asked->decision, two});
  h.all_ready();
  for (int s = 0; s < 6; ++s) h.commit_step();
  h.lose(0);  // nodes 0 and 2 hold experts 0 and 1
  h.lose(2);
  h.asked.reset();
  h.membership(workers({1, 3}));
  CHECK(h.asked);  // at once, not after kReportSettleMs
  CHECK_FALSE(h.armed(Timer::retry));
}

TEST_CASE("losses back to back: a recovery's steps run again count from the steps committed when it began") {
  // seen on the P3 trace: four losses in a second, the first restore rewound 14 to 10, the later
  // ones 10 to 10 before any step committed, and the recovery's record said 0 steps run again
  Harness h(small_job(6));
  h.start(workers({0, 1, 2, 3, 4, 5}));
  for (int s = 0; s < 6; ++s) h.commit_step();
  for (NodeId n : {1, 3, 5}) h.slices(n, 4, 4, 0, 13);
  for (NodeId n : {0, 2, 4}) h.lose(n);  // every holder of experts 0 and 1
  h.membership(workers({1, 3, 5}));
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);
  h.all_ready();
  REQUIRE(h.d.steps().next_step() == 5);  // step 5 runs again
  // before step 5 commits, another loss takes every copy of some expert: restored again, 5 to 5
  const auto& applied = *h.d.applied();
  REQUIRE(applied.ranks.size() == 3);
  std::map<plan::ExpertId, int> holders;
  for (const auto& held : applied.plan.layers[0].placement)
    for (plan::ExpertId e : held) ++holders[e];
  size_t sole = applied.ranks.size();  // a rank holding some expert's only copy
  for (size_t r = 0; r < applied.ranks.size() && sole == applied.ranks.size(); ++r)
    for (plan::ExpertId e : applied.plan.layers[0].placement[r])
      if (holders[e] == 1) sole = r;
  REQUIRE(sole < applied.ranks.size());
  std::vector<Participant> left;
  for (size_t r = 0; r < applied.ranks.size(); ++r)
    if (r != sole) left.push_back(applied.ranks[r]);
  h.lose(applied.ranks[sole].node);
  h.membership(left);
  h.decide();
  u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);
  h.all_ready();
  h.commit_step();  // 5
  std::vector<RecoveryRecord> done;
  for (const auto& a : h.history)
    if (auto* r = std::get_if<act::RecoveryDone>(&a)) done.push_back(r->record);
  REQUIRE(done.size() == 1);  // one recovery, from the first loss to the first commit
  CHECK(done[0].source == "peers");
  CHECK(done[0].rerun == 1);  // 6 committed when it began, training went on from step 5
}

TEST_CASE("losses back to back: the second loss does not pause for the reports the first one waited for") {
  // seen on the P3 trace: four losses within a second, no commit between them; the second, third
  // and fourth switches each began 150 ms after their loss, waiting for reports that no commit
  // could have changed
  Harness h = trained(5);  // no window reported: the holders' loss restores from disk
  h.lose(0);  // nodes 0 and 2 hold experts 0 and 1
  h.lose(2);
  h.asked.reset();
  h.membership(workers({1, 3}));
  CHECK_FALSE(h.asked);  // the last commit's windows may still be reported
  bool settle = false;
  for (const auto& a : h.all<act::ArmTimer>()) settle = settle || (a.timer == Timer::retry && a.ms == 150);
  CHECK(settle);
  h.timer(Timer::retry, 150);
  REQUIRE(h.asked);
  h.decide();
  REQUIRE(h.sent<wire::PlanUpdate>().size() == 1);
  // node 3 lost while the restoring plan switches, 150 ms after the last commit (and a node 4 has
  // joined): the next plan is asked for at once
  h.lose(3, "connection closed");
  h.asked.reset();
  h.membership(workers({1, 4}), 50);
  CHECK(h.asked);
  CHECK_FALSE(h.armed(Timer::retry));
}

namespace {

// Six workers at step 6 committed, each step taking `step_ms`; nodes 1, 3 and 5 report the window
// of iteration 4 (the last commit, 5, completed the next one: its report is not in yet). Nodes 0,
// 2 and 4 are lost 20 ms after the commit: every holder of experts 0 and 1.
Harness lost_after_commit(int64_t step_ms) {
  Harness h(small_job(6));
  h.start(workers({0, 1, 2, 3, 4, 5}));
  for (int s = 0; s < 6; ++s) {
    h.now_ns += step_ms * 1'000'000;
    h.commit_step();
  }
  for (NodeId n : {1, 3, 5}) h.slices(n, 4, 4, 0, 13);
  for (NodeId n : {0, 2, 4}) h.lose(n);
  h.asked.reset();
  h.membership(workers({1, 3, 5}), 20);
  return h;
}

// The planner answers; the one plan update the driver sends then.
wire::PlanUpdate decided_update(Harness& h) {
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  return u[0].second;
}

}  // namespace

TEST_CASE("a loss right after a commit waits for the report of the window it completed, where that costs less than the step it saves") {
  Harness h = lost_after_commit(200);
  CHECK_FALSE(h.asked);  // restoring window 4 runs a 200 ms step again: worth waiting for window 5
  CHECK(h.armed_ms(Timer::retry) == 180);  // at most the step's time after the commit
  h.slices(1, 5, 5, 0, 7, 40);  // half of window 5, 40 ms later
  CHECK_FALSE(h.asked);
  h.slices(3, 5, 5, 7, 6);  // and the rest: the pause ends with this report
  REQUIRE(h.asked);
  CHECK_FALSE(h.armed(Timer::retry));
  const auto u = decided_update(h);
  CHECK(u.restore_window == 5);
  CHECK(u.step == 6);  // nothing runs again
  CHECK(u.restore_keeps);  // one slot, the survivors' own step: they keep what they hold
}

TEST_CASE("a loss a step after the commit or later restores the window reported at once, and one whose newest window never comes waits no more than a step") {
  Harness h = lost_after_commit(10);  // the loss 20 ms after the commit: the 10 ms step is cheaper
  REQUIRE(h.asked);
  CHECK_FALSE(h.armed(Timer::retry));
  const auto u = decided_update(h);
  CHECK(u.restore_window == 4);
  CHECK(u.step == 5);  // step 5 runs again
  Harness slow = lost_after_commit(2000);  // window 5 never comes whole (a writer was lost with it)
  CHECK_FALSE(slow.asked);
  CHECK(slow.armed_ms(Timer::retry) == 280);  // kNewestWindowWaitMs after the commit, not the 2 s step
  slow.timer(Timer::retry, 280);
  CHECK(decided_update(slow).restore_window == 4);
}

TEST_CASE("a loss 100 ms after the last commit waits for the reports only until they are due") {
  Harness h = trained(5);
  h.lose(0, "connection closed");
  h.lose(2, "connection closed");
  h.asked.reset();
  h.membership(workers({1, 3}), 100);
  CHECK_FALSE(h.asked);
  CHECK(h.armed_ms(Timer::retry) == 50);  // kReportSettleMs after the commit, not after the loss
  h.timer(Timer::retry, 50);
  CHECK(h.asked);
}

TEST_CASE("a restoring plan abandoned as a rank leaves: with no sparse window to wait for, the next is asked at once") {
  auto cfg = small_job(6);
  cfg.peer_copies = 0;
  Harness h(cfg);
  h.start(workers({0, 1, 2, 3, 4, 5}));
  for (int s = 0; s < 6; ++s) h.commit_step();
  for (NodeId n : {0, 2, 4}) h.lose(n);  // every holder of experts 0 and 1
  h.asked.reset();
  h.membership(workers({1, 3, 5}));
  REQUIRE(h.asked);
  h.decide();
  REQUIRE(h.d.pending_plan());
  h.asked.reset();
  h.lose(5);
  h.membership(workers({1, 3}));
  CHECK(h.noted("plan_failed"));
  CHECK(h.asked);  // not after kPlanRetryMs
  CHECK_FALSE(h.armed(Timer::retry));
}

// The rebuild rung's stories: workers that log what they dispatch (train.expert_logs).
DriverConfig with_logs() {
  auto cfg = small_job();
  cfg.expert_logs = true;
  return cfg;
}

// Every holder of experts lost after 6 steps on nodes 0..3 (nodes 0 and 2 die), a window of
// iterations 4..5 held by nodes 1 and 3; nodes 4 and 5 join. Returns the plan in force before.
uint64_t lose_holders(Harness& h) {
  h.slices(1, 4, 5, 0, 7);
  h.slices(3, 4, 5, 7, 6);
  const uint64_t before = h.d.applied()->number();
  h.lose(0);
  h.lose(2);
  h.membership(workers({1, 3, 4, 5}));
  h.timer(Timer::retry, 50);
  h.decide();
  return before;
}

TEST_CASE("every holder of an expert lost, the workers logging: its new holders rebuild it from its copy and the upstream logs, nobody rolls back") {
  Harness h = trained(6, with_logs());
  const auto old_ranks = h.d.applied()->ranks;
  const auto lost = lost_experts(h.d.applied(), workers({1, 3, 4, 5}));
  REQUIRE_FALSE(lost.empty());
  const uint64_t before = lose_holders(h);
  CHECK(h.note_detail("rebuild_begun").find("lost experts (every copy lost: layer ") != std::string::npos);
  CHECK(h.note_detail("rebuild_begun").find("from the sparse window of iterations 4..5 held by 2 nodes and the upstream "
                                            "logs up to iteration 5 on 4 workers; nobody rolls back") != std::string::npos);
  CHECK_FALSE(h.noted("restore_begun"));
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  const auto& p = u[0].second;
  CHECK_FALSE(p.restore);
  CHECK(p.step == 6);  // training goes on where it was
  CHECK(p.rebuild_window == 4);
  CHECK(p.rebuild_to == 5);
  CHECK(p.rebuild_plan == before);
  REQUIRE(p.rebuild_ranks.size() == old_ranks.size());
  for (size_t r = 0; r < old_ranks.size(); ++r) CHECK(p.rebuild_ranks[r].node == old_ranks[r].node);
  std::set<plan::LayerExpert> named;  // the holders name the lost experts, and only them
  for (const auto& hd : p.rebuild_holders)
    for (const auto& ref : hd.units) {
      CHECK(ref.kind == uint8_t(UnitKind::expert));
      named.insert({uint32_t(ref.layer), plan::ExpertId(ref.expert)});
    }
  CHECK(named == lost);
  for (const auto& t : p.transfers)  // nobody has a lost one to send
    CHECK_FALSE((t.kind == uint8_t(UnitKind::expert) && lost.count({uint32_t(t.layer), plan::ExpertId(t.expert)})));
  h.all_ready();
  CHECK(h.note_detail("restored").find("upstream logs") != std::string::npos);
  CHECK(h.d.steps().next_step() == 6);
  h.commit_step();  // 6
  bool logs = false;
  for (const auto& a : h.history) {
    CHECK_FALSE(std::holds_alternative<act::StepsLost>(a));
    if (auto* r = std::get_if<act::RecoveryDone>(&a)) logs = r->record.source == "logs" && r->record.rerun == 0;
  }
  CHECK(logs);
}

TEST_CASE("a rebuild whose newest window in the reports is older than the agents keep waits for their reports, and rebuilds from the newer window") {
  // seen in t0555 at 7 ms steps: the reports named a window two periods older than the newest, its
  // holder had dropped it, and the rebuild failed over to the sparse rung
  Harness h = trained(8, with_logs());
  h.slices(1, 4, 5, 0, 7);  // said at step 5: with windows of one iteration its agent keeps 6 and 7 by now
  h.slices(3, 4, 5, 7, 6);
  h.lose(0);
  h.lose(2);
  h.asked.reset();
  h.membership(workers({1, 3, 4, 5}));
  CHECK_FALSE(h.asked);  // a plan now would rebuild from window 4, which is likely gone
  bool settle = false;
  for (const auto& a : h.all<act::ArmTimer>()) settle = settle || (a.timer == Timer::retry && a.ms == 150);
  CHECK(settle);
  h.slices(1, 7, 7, 0, 7);  // their reports since
  h.slices(3, 7, 7, 7, 6);
  h.timer(Timer::retry, 150);
  h.decide();
  CHECK(h.note_detail("rebuild_begun").find("from the sparse window of iterations 7..7 held by 2 nodes") !=
        std::string::npos);
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.rebuild_window == 7);
  CHECK(u[0].second.step == 8);
}

TEST_CASE("a rebuild that cannot be applied falls to the sparse rung, which rolls back and loses nothing") {
  Harness h = trained(6, with_logs());
  lose_holders(h);
  REQUIRE(h.sent<wire::PlanUpdate>().size() == 1);
  auto ranks = h.pending_ranks();
  h.ready(ranks[0], *h.d.pending_plan(), false,
          "plan 3: rebuilding 2 lost experts from the upstream logs: rank 0's log of iteration 5 under plan 1 is held "
          "soundly by no live agent");
  CHECK(h.note_detail("rebuild_failed").find("rank 0's log of iteration 5") != std::string::npos);
  CHECK(h.note_detail("rebuild_failed").find("falling back to the sparse rung") != std::string::npos);
  h.timer(Timer::retry, 1000);
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore);
  CHECK(u[0].second.restore_window == 4);  // the sparse rung
  CHECK(u[0].second.rebuild_window == -1);
  h.all_ready();
  CHECK(h.note_detail("restored").find("sparse window") != std::string::npos);
}

TEST_CASE("no rebuild where the window began before the plan in force: the logs of its iterations are another plan's") {
  Harness h = trained(6, with_logs());
  h.slices(1, 0, 1, 0, 7);  // window 0..1 only
  h.slices(3, 0, 1, 7, 6);
  // a join re-plans at a step boundary: the plan in force begins after the window
  h.asked.reset();
  h.membership(workers({0, 1, 2, 3, 4}));
  h.commit_step();  // 6
  h.timer(Timer::join, 2000);
  h.commit_step();  // 7: the join timer looks between steps
  REQUIRE(h.asked);
  h.decide();
  h.all_ready();
  h.commit_step();  // 8
  REQUIRE(h.d.applied()->from_step == 8);
  // every holder of layer 0 expert 0 lost
  const auto& applied = *h.d.applied();
  std::vector<Participant> survivors;
  for (size_t r = 0; r < applied.ranks.size(); ++r) {
    const auto& held = applied.plan.layers[0].placement[r];
    if (std::find(held.begin(), held.end(), plan::ExpertId(0)) != held.end())
      h.lose(applied.ranks[r].node);
    else
      survivors.push_back(applied.ranks[r]);
  }
  REQUIRE(survivors.size() >= 2);
  REQUIRE_FALSE(lost_experts(h.d.applied(), survivors).empty());
  std::sort(survivors.begin(), survivors.end());
  h.membership(survivors);
  h.timer(Timer::retry, 50);
  h.decide();
  CHECK_FALSE(h.noted("rebuild_begun"));
  CHECK(h.note_detail("restore_begun").find("the sparse window of iterations 0..1") != std::string::npos);
}

TEST_CASE("a dense snapshot newer than every sparse window is the cheaper restore") {
  Restorable have{8, [] { return std::optional<uint64_t>(5); }};  // dense of step 8; the replay ends with step 6's state
  CHECK(restore_rung({"layer 0 expert 1"}, have) == Rung::dense);
  have.dense_step = 6;
  CHECK(restore_rung({"layer 0 expert 1"}, have) == Rung::sparse);
  have.sparse_to = nullptr;
  CHECK(restore_rung({"layer 0 expert 1"}, have) == Rung::dense);
  CHECK(restore_rung({}, have) == Rung::elastic);
}

TEST_CASE("losses back to back: steps a later loss aborted are counted apart from the engine's recovery time") {
  Harness h = trained(5);
  h.lose(3);
  recover(h, workers({0, 1, 2}));  // plan in force; its step computes for 2 s, then node 2 dies
  REQUIRE(h.d.steps().in_flight());
  h.on(in::Lost{2, std::nullopt, "connection closed"}, 2000);
  recover(h, workers({0, 1}));
  h.commit_step();
  auto rec = h.ever<act::RecoveryDone>();
  REQUIRE(rec.size() == 1);  // one recovery, from the first loss to the first commit
  CHECK(rec[0].record.interrupted_s == doctest::Approx(2.0).epsilon(0.01));
  CHECK(rec[0].record.seconds < 0.1);  // the two switches: the engine's own time
  bool said = false;
  for (const auto& a : h.history)
    if (auto* n = std::get_if<act::Note>(&a); n && n->kind == "recovered")
      said = n->detail.find("(2000 ms computing steps that later losses aborted)") != std::string::npos;
  CHECK(said);
}

TEST_CASE("too few workers left to plan: the job waits for capacity, says so, and the recovery counts the wait apart") {
  Harness h = trained(4);
  h.lose(3);
  h.asked.reset();
  h.membership(workers({0, 1, 2}), 2);
  REQUIRE(h.asked);
  h.on(in::Decided{h.asked->decision, fail("3 workers x 2 slots cannot hold 9 experts once each")});
  CHECK(h.d.phase() == Phase::gathering);
  CHECK(h.noted("capacity_wait"));
  CHECK(h.note_detail("capacity_wait").find("cannot hold 9 experts") != std::string::npos);
  CHECK(h.armed(Timer::capacity));
  // 40 s later a new node joins: a plan can be made again
  h.asked.reset();
  h.membership(workers({0, 1, 2, 4}), 40000);
  REQUIRE(h.asked);
  h.decide();
  CHECK(h.noted("capacity_back"));
  bool cancelled = false;
  for (const auto& a : h.all<act::CancelTimer>()) cancelled = cancelled || a.timer == Timer::capacity;
  CHECK(cancelled);
  h.all_ready();
  h.commit_step();
  auto rec = h.ever<act::RecoveryDone>();
  REQUIRE(rec.size() == 1);
  CHECK(rec[0].record.capacity_wait_s == doctest::Approx(40.0).epsilon(0.01));
  CHECK(rec[0].record.seconds < 1.0);  // the engine's own time: the switch and the step
  bool said = false;
  for (const auto& a : h.history)
    if (auto* n = std::get_if<act::Note>(&a); n && n->kind == "recovered")
      said = n->detail.find("(40000 ms of it waiting for capacity)") != std::string::npos ||
             n->detail.find("(40 s of it waiting for capacity)") != std::string::npos;
  CHECK(said);
}

TEST_CASE("a plan is asked with what each of its workers holds under the plan in force, nothing for one that joined") {
  Harness h = trained(5);
  const AppliedPlan in_force = *h.d.applied();
  h.lose(3);
  h.asked.reset();
  h.membership(workers({0, 1, 2, 5}));  // a replacement came meanwhile
  REQUIRE(h.asked);
  REQUIRE(h.asked->workers == 4);
  const auto& held = h.asked->held;  // the placement's ctx.current
  REQUIRE(held.size() == in_force.plan.layers.size());
  const auto use = workers({0, 1, 2, 5});
  for (size_t l = 0; l < held.size(); ++l) {
    CAPTURE(l);
    REQUIRE(held[l].size() == 4);
    for (size_t i = 0; i < 3; ++i) {
      auto pos = size_t(std::find(in_force.ranks.begin(), in_force.ranks.end(), use[i]) - in_force.ranks.begin());
      REQUIRE(pos < in_force.ranks.size());
      CHECK(held[l][i] == in_force.plan.layers[l].placement[pos]);
    }
    CHECK(held[l][3].empty());  // node 5 joined: it holds nothing
  }
}
