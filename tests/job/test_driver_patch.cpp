// test_driver_patch.cpp — SPARe's patch told to the job driver: a grouped plan (two groups of two)
// loses a rank in the middle of a step; the driver asks the redundancy policy, sends the patch to
// the ranks left, counts only their patched votes and commits the step without aborting it, then
// re-plans; a wipe-out aborts instead; a second loss in the same step patches again; a plan of one
// group aborts as before; a stop right after a patched step saves with the ranks left.
#include <doctest/doctest.h>

#include "job/driver_harness.h"

using namespace sal;
using namespace sal::job;
using namespace sal::job::test;

namespace {

// Four workers in two groups of two, each group holding all four experts; replication-style
// stacks: both groups host types 0 and 1, group g computes type g.
PlanRecord grouped_plan(uint32_t n, uint64_t version) {
  PlanRecord r = dealt_plan(n, version);
  r.plan.groups = {n / 2, n - n / 2};
  r.plan.stacks.redundancy = 2;
  r.plan.stacks.hosts = {{0, 1}, {0, 1}};
  r.plan.stacks.alive = {true, true};
  r.plan.stacks.assignment = {{0}, {1}};
  return r;
}

// Four workers, `steps` committed, step `steps` in flight under the grouped plan.
Harness grouped(uint64_t steps) {
  Harness h(small_job());
  h.membership(workers({0, 1, 2, 3}));
  REQUIRE(h.asked);
  h.on(in::Decided{h.asked->decision, grouped_plan(4, ++h.versions)});
  h.all_ready();
  REQUIRE(h.d.steps().in_flight());
  for (uint64_t s = 0; s < steps; ++s) h.commit_step();
  return h;
}

void vote(Harness& h, Participant p, uint64_t step, uint32_t patch, bool ok = true) {
  wire::StepVote v;
  v.node_id = p.node, v.index = p.index, v.epoch = h.d.steps().epoch(), v.step = step, v.ok = ok;
  v.ce_sum = 2.0 * 64, v.tokens = 64, v.lr = 1e-3, v.grad_norm = 1, v.patch = patch;
  v.loads.assign(2 * 4, 8);
  if (!ok) v.detail = "gradient sync: peer closed the connection";
  h.on(in::Vote{v});
}

plan::ShardStacks stacks(std::vector<std::vector<uint32_t>> assignment, std::vector<bool> alive, bool wipeout = false) {
  plan::ShardStacks s;
  s.redundancy = 2;
  s.hosts = {{0, 1}, {0, 1}};
  s.alive = std::move(alive);
  s.assignment = std::move(assignment);
  s.wipeout = wipeout;
  return s;
}

}  // namespace

TEST_CASE("a rank of a grouped plan lost mid-step: the step is patched, not aborted, and commits") {
  Harness h = grouped(3);
  vote(h, {0, 0}, 3, 0);  // group 0 voted before the loss: its vote no longer counts
  h.lose(3, "node 3 died");
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);
  CHECK(asks[0].alive == std::vector<bool>{true, false});
  CHECK(asks[0].current.assignment == std::vector<std::vector<uint32_t>>{{0}, {1}});
  CHECK(h.d.steps().in_flight());
  CHECK(h.d.steps().aborted() == 0);
  vote(h, {2, 0}, 3, 0, false);  // its group lost a rank: the vote no counts for nothing
  CHECK(h.d.steps().aborted() == 0);

  h.on(in::PatchDecided{asks[0].decision, stacks({{0, 1}, {}}, {true, false}), "spare gen 1"});
  auto patches = h.sent<wire::StepPatch>();
  REQUIRE(patches.size() == 1);
  const wire::StepPatch& p = patches[0].second;
  CHECK(p.step == 3);
  CHECK(p.patch == 1);
  CHECK(p.ranks == std::vector<uint32_t>{0, 1, 2});
  CHECK(p.damaged == std::vector<uint32_t>{1});
  CHECK(p.extra == std::vector<std::vector<uint32_t>>{{1}, {}});
  CHECK(patches[0].first.to.size() == 3);
  CHECK(h.noted("patch"));
  CHECK(h.note_detail("patch") ==
        "step 3 patch 1: lost 3.0 (group 1): type 1 -> group 0; 3 ranks synchronise (stacks by spare gen 1, depth 2)");

  for (uint32_t n : {0u, 1u, 2u}) vote(h, {NodeId(n), 0}, 3, 1);
  CHECK(h.d.steps().committed() == 4);
  CHECK(h.d.steps().patched() == 1);
  CHECK(h.d.steps().aborted() == 0);
  auto rec = h.ever<act::RecoveryDone>();
  REQUIRE(rec.size() == 1);
  CHECK(rec[0].record.kind == "patch");
  CHECK(rec[0].record.step == 3);
  // the next boundary re-plans: the damaged group recovers inside itself
  h.asked.reset();
  h.membership(workers({0, 1, 2}));
  h.timer(Timer::soon);
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 3);
}

TEST_CASE("a patch the redundancy policy cannot give (a wipe-out) aborts the step as before") {
  Harness h = grouped(2);
  h.lose(1);
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);
  h.on(in::PatchDecided{asks[0].decision, stacks({{}, {}}, {false, true}, true)});
  CHECK(h.sent<wire::StepPatch>().empty());
  CHECK(h.d.steps().aborted() == 1);
  CHECK(h.note_detail("step_aborted").find("wiped out") != std::string::npos);
  h.on(in::PatchDecided{asks[0].decision, stacks({{}, {0, 1}}, {false, true})});  // a late answer: nothing
  CHECK(h.sent<wire::StepPatch>().empty());
}

TEST_CASE("a second loss in the same step asks again, and the first answer and the first patch's votes count for nothing") {
  Harness h = grouped(5);
  h.lose(3);
  auto first = h.all<act::DecidePatch>();
  REQUIRE(first.size() == 1);
  h.on(in::PatchDecided{first[0].decision, stacks({{0, 1}, {}}, {true, false})});
  REQUIRE(h.sent<wire::StepPatch>().size() == 1);
  vote(h, {0, 0}, 5, 1);
  h.lose(2);  // the rest of group 1
  auto second = h.all<act::DecidePatch>();
  REQUIRE(second.size() == 1);
  CHECK(second[0].alive == std::vector<bool>{true, false});
  h.on(in::PatchDecided{first[0].decision, stacks({{0, 1}, {}}, {true, false})});  // stale
  CHECK(h.sent<wire::StepPatch>().empty());
  h.on(in::PatchDecided{second[0].decision, stacks({{0, 1}, {}}, {true, false})});
  auto p = h.sent<wire::StepPatch>();
  REQUIRE(p.size() == 1);
  CHECK(p[0].second.patch == 2);
  CHECK(p[0].second.ranks == std::vector<uint32_t>{0, 1});
  vote(h, {1, 0}, 5, 1);  // answers the first patch
  CHECK(h.d.steps().committed() == 5);
  vote(h, {0, 0}, 5, 2);
  vote(h, {1, 0}, 5, 2);
  CHECK(h.d.steps().committed() == 6);
  CHECK(h.d.steps().patched() == 1);
}

TEST_CASE("a plan of one group is never patched: a loss mid-step aborts it") {
  Harness h(small_job());
  h.start(workers({0, 1, 2, 3}));
  h.commit_step();
  h.lose(2);
  CHECK(h.all<act::DecidePatch>().empty());
  CHECK(h.d.steps().aborted() == 1);
}

TEST_CASE("a stop right after a patched step saves with the ranks left, the one gone named absent") {
  Harness h = grouped(3);
  h.lose(3, "node 3 died");
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);
  h.membership(workers({0, 1, 2}));  // the view without it, as the controller saw it die
  h.on(in::PatchDecided{asks[0].decision, stacks({{0, 1}, {}}, {true, false}), "spare gen 1"});
  for (uint32_t n : {0u, 1u, 2u}) vote(h, {NodeId(n), 0}, 3, 1);
  REQUIRE(h.d.steps().committed() == 4);
  CHECK(h.d.phase() == Phase::running);
  h.on(in::Stop{"4 steps committed", true});
  auto saves = h.sent<wire::SaveCheckpoint>();
  REQUIRE(saves.size() == 1);
  CHECK(saves[0].second.absent == std::vector<uint32_t>{3});  // its units are written by their next holders
  CHECK(saves[0].first.to.size() == 3);
  for (uint32_t n : {0u, 1u, 2u}) h.on(in::Saved{wire::SaveDone{n, 0, 4, true, "", 3, false, 0, 0, 0}});
  CHECK(h.d.phase() == Phase::done);
  CHECK(h.d.failure().empty());
  CHECK(h.all<act::CheckpointComplete>().size() == 1);
}
