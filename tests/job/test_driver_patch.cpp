// test_driver_patch.cpp — SPARe's patch told to the job driver: a grouped plan (two groups of two)
// loses a rank in the middle of a step; the driver asks the redundancy policy, sends the patch to
// the ranks left, counts only their patched votes and commits the step without aborting it; the
// steps after it train on degraded (the patch's arrangement kept) until workers join, until they
// have lost a plan switch's cost ("cheaper"), or not at all ("regroup"); a loss in a degraded step
// patches it again with the earlier losses still out; a wipe-out aborts instead; a second loss in
// the same step patches again; a plan of one group aborts as before; a stop right after a patched
// step saves with the ranks left; a snapshot of a degraded step leaves the lost rank out. A patch
// names the nodes still up that hold each survivor's sparse slots from then on, and, spreading, the
// damaged groups whose ranks left still hold every expert (they compute in the degraded steps).
#include <doctest/doctest.h>

#include "job/driver_harness.h"

using namespace sal;
using namespace sal::job;
using namespace sal::job::test;

namespace {

// Four workers in two groups of two, each group holding all four experts (each worker two of them,
// or with four `slots` all four); replication-style stacks: both groups host types 0 and 1, group g
// computes type g.
PlanRecord grouped_plan(uint32_t n, uint64_t version, uint32_t slots = 2) {
  PlanRecord r = dealt_plan(n, version, 4, slots);
  r.plan.groups = {n / 2, n - n / 2};
  r.plan.stacks.redundancy = 2;
  r.plan.stacks.hosts = {{0, 1}, {0, 1}};
  r.plan.stacks.alive = {true, true};
  r.plan.stacks.assignment = {{0}, {1}};
  return r;
}

// Every participant of the step in flight votes (patch `patch`), the last `ms` after the step began;
// then the driver's next turn.
void commit_in(Harness& h, int64_t ms, uint32_t patch = 0);

// Four workers, `steps` committed (each `step_ms` long), step `steps` in flight under the grouped
// plan, whose switch took `switch_ms`.
Harness grouped(uint64_t steps, int64_t step_ms = 0, int64_t switch_ms = 0, DriverConfig cfg = small_job(),
                uint32_t slots = 2) {
  Harness h(cfg);
  h.membership(workers({0, 1, 2, 3}));
  REQUIRE(h.asked);
  h.on(in::Decided{h.asked->decision, grouped_plan(4, ++h.versions, slots)});
  auto ranks = h.pending_ranks();
  for (size_t i = 0; i < ranks.size(); ++i)
    h.on(in::Ready{wire::PlanReady{ranks[i].node, ranks[i].index, *h.d.pending_plan(), true, "", 1, 0.5, 0.5}},
         i + 1 == ranks.size() ? switch_ms : 0);
  REQUIRE(h.d.steps().in_flight());
  for (uint64_t s = 0; s < steps; ++s) commit_in(h, step_ms);
  return h;
}

void vote(Harness& h, Participant p, uint64_t step, uint32_t patch, bool ok = true, int64_t after_ms = 0) {
  wire::StepVote v;
  v.node_id = p.node, v.index = p.index, v.epoch = h.d.steps().epoch(), v.step = step, v.ok = ok;
  v.ce_sum = 2.0 * 64, v.tokens = 64, v.lr = 1e-3, v.grad_norm = 1, v.patch = patch;
  v.loads.assign(2 * 4, 8);
  if (!ok) v.detail = "gradient sync: peer closed the connection";
  h.on(in::Vote{v}, after_ms);
}

void commit_in(Harness& h, int64_t ms, uint32_t patch) {
  REQUIRE(h.d.steps().in_flight());
  const uint64_t step = h.d.steps().next_step();
  std::vector<Participant> who(h.d.steps().participants().begin(), h.d.steps().participants().end());
  for (size_t i = 0; i < who.size(); ++i) vote(h, who[i], step, patch, true, i + 1 == who.size() ? ms : 0);
  REQUIRE(h.d.steps().committed() == step + 1);
  h.timer(Timer::soon);
}

plan::ShardStacks stacks(std::vector<std::vector<uint32_t>> assignment, std::vector<bool> alive, bool wipeout = false,
                         plan::AfterPatch after = plan::AfterPatch::cheaper) {
  plan::ShardStacks s;
  s.redundancy = 2;
  s.hosts = {{0, 1}, {0, 1}};
  s.alive = std::move(alive);
  s.assignment = std::move(assignment);
  s.wipeout = wipeout;
  s.after_patch = after;
  return s;
}

// Step `steps` of grouped() loses node 3 and is patched (group 0 computes type 1 too) with
// `after`; it commits (each vote `step_ms` after the last).
// Node 3 (group 1: nodes 2 and 3) lost mid-step, or the whole of group 1; the step patched and committed.
void patch_and_commit(Harness& h, plan::AfterPatch after, int64_t step_ms, bool whole_group = false) {
  const uint64_t step = h.d.steps().next_step();
  if (whole_group) h.lose(2, "node 2 died");
  h.lose(3, "node 3 died");
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);  // (the last loss's: a second loss asks again)
  h.membership(whole_group ? workers({0, 1}) : workers({0, 1, 2}));
  h.on(in::PatchDecided{asks.back().decision, stacks({{0, 1}, {}}, {true, false}, false, after), "spare gen 1"});
  REQUIRE(h.sent<wire::StepPatch>().size() == 1);
  commit_in(h, step_ms, 1);
  REQUIRE(h.d.steps().committed() == step + 1);
}

// The detail of the last note of `kind` since the harness began ("" for none).
std::string said(const Harness& h, const std::string& kind) {
  std::string detail;
  for (const auto& n : h.ever<act::Note>())
    if (n.kind == kind) detail = n.detail;
  return detail;
}

// The last StepBegin sent.
std::pair<act::Send, wire::StepBegin> begun(const Harness& h) {
  std::optional<std::pair<act::Send, wire::StepBegin>> last;
  for (const auto& s : h.ever<act::Send>())
    if (auto* b = std::get_if<wire::StepBegin>(&s.msg)) last = {s, *b};
  REQUIRE(last);
  return *last;
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
  // the sparse slots of the steps after it go to the nodes still up (the plan's peers named node 3)
  REQUIRE(p.slice_peers.size() == 4);
  CHECK(p.slice_peers[3].nodes.empty());
  for (uint32_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK_FALSE(p.slice_peers[r].nodes.empty());
    for (uint32_t n : p.slice_peers[r].nodes) CHECK((n != 3 && n != r));
  }
  CHECK(h.noted("patch"));
  CHECK(h.note_detail("patch") ==
        "step 3 patch 1: lost 3.0 (group 1): type 1 -> group 0; 3 ranks synchronise (stacks by spare gen 1, depth 2; "
        "after it: cheaper)");

  for (uint32_t n : {0u, 1u, 2u}) vote(h, {NodeId(n), 0}, 3, 1);
  CHECK(h.d.steps().committed() == 4);
  CHECK(h.d.steps().patched() == 1);
  CHECK(h.d.steps().aborted() == 0);
  int journaled = 0;  // the run's count goes on across a controller's restart
  for (const auto& j : h.ever<act::Journal>())
    if (const auto* x = std::get_if<rec::Patched>(&j.record)) journaled += int(x->count);
  CHECK(journaled == 1);
  auto rec = h.ever<act::RecoveryDone>();
  REQUIRE(rec.size() == 1);
  CHECK(rec[0].record.kind == "patch");
  CHECK(rec[0].record.step == 3);
  CHECK(said(h, "step_patched").find("training on degraded (cheaper): group(s) 1 out") != std::string::npos);
  // the next step is degraded: the patch's ranks, its arrangement kept
  h.membership(workers({0, 1, 2}));
  h.timer(Timer::soon);
  auto [to, b] = begun(h);
  CHECK(to.to.size() == 3);
  CHECK(b.step == 4);
  CHECK(b.kept_step == 3);
  CHECK(b.kept_patch == 1);
  CHECK(h.d.steps().participants().size() == 3);
}

TEST_CASE("a spread patch: the damaged group's types go to every group up, each a part, none whole") {
  Harness h = grouped(3);
  h.lose(3, "node 3 died");
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);
  plan::ShardStacks s = stacks({{0, 1}, {}}, {true, false});
  s.spread = true;
  h.on(in::PatchDecided{asks[0].decision, s, "spare gen 1"});
  auto patches = h.sent<wire::StepPatch>();
  REQUIRE(patches.size() == 1);
  const wire::StepPatch& p = patches[0].second;
  CHECK(p.damaged == std::vector<uint32_t>{1});
  CHECK(p.spread == std::vector<uint32_t>{1});
  CHECK(p.extra == std::vector<std::vector<uint32_t>>{{}, {}});
  CHECK(p.rejoin.empty());  // node 2, left of group 1, holds two experts of four
  CHECK(h.note_detail("patch") ==
        "step 3 patch 1: lost 3.0 (group 1): type 1 spread over groups up 0; 3 ranks synchronise (stacks by spare gen 1, "
        "depth 2; after it: cheaper)");
}

TEST_CASE("degraded steps keep the patch until workers join, and the join re-plans over every worker") {
  Harness h = grouped(3, 50, 100);
  patch_and_commit(h, plan::AfterPatch::degraded, 120);
  h.asked.reset();
  for (int i = 0; i < 10; ++i) {
    auto [to, b] = begun(h);
    CHECK(b.kept_patch == 1);
    CHECK(b.kept_step == 3);
    commit_in(h, 200);  // far slower than before: "degraded" keeps them anyway
  }
  CHECK_FALSE(h.asked);
  CHECK(h.d.steps().aborted() == 0);
  CHECK(h.ever<act::RecoveryDone>().size() == 1);  // the patch's; degraded steps are no recovery
  auto rows = h.ever<act::StepDone>();
  REQUIRE(!rows.empty());
  CHECK(rows.back().record.workers == 3);
  h.membership(workers({0, 1, 2, 4}));  // a replacement: joins wait mesh.join_batch_ms
  commit_in(h, 200);
  CHECK_FALSE(h.asked);
  h.timer(Timer::join, 1000);
  commit_in(h, 200);
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 4);
  h.decide();
  CHECK(said(h, "plan").find("workers changed: 1 joined, 0 left (degraded since step 3)") != std::string::npos);
}

TEST_CASE("cheaper: degraded steps go on until they have lost a plan switch's cost, then the survivors regroup") {
  Harness h = grouped(5, 60, 100);  // steps of 60 ms, a switch of 100 ms, 100 steps to run
  patch_and_commit(h, plan::AfterPatch::cheaper, 120, true);  // group 1 lost whole: nobody sits out
  CHECK(said(h, "step_patched").find("against a regrouped plan's step (120 ms: the 60 ms before x 4 / 2 ranks)") !=
        std::string::npos);
  h.asked.reset();
  commit_in(h, 120);  // a regrouped plan's step: nothing lost
  commit_in(h, 160);  // 40 ms lost
  commit_in(h, 160);  // 80
  CHECK_FALSE(h.asked);
  CHECK(begun(h).second.kept_patch == 1);
  commit_in(h, 160);  // 120 >= 100: the survivors re-plan at this boundary
  CHECK(said(h, "regroup") ==
        "4 degraded steps since step 5 lost 120 ms against a regrouped plan's step (120 ms: the 60 ms before x 4 / 2 "
        "ranks); a plan switch costs 100 ms: the survivors regroup");
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 2);
  CHECK(h.sent<wire::StepBegin>().empty());
}

TEST_CASE("cheaper: degraded steps that only scatter around a regrouped plan's step lose nothing, however many") {
  Harness h = grouped(5, 60, 100);  // as above: a regrouped plan's step 120 ms, a switch 100 ms
  patch_and_commit(h, plan::AfterPatch::cheaper, 120, true);
  h.asked.reset();
  for (int i = 0; i < 10; ++i) commit_in(h, i % 2 ? 90 : 150);  // 30 over, 30 under, ten times
  CHECK_FALSE(h.asked);  // 150 ms over in all, made up each time: no regroup
  CHECK(said(h, "regroup").empty());
  commit_in(h, 90);  // 30 under: nothing in hand (never below 0) ...
  commit_in(h, 200), commit_in(h, 130);  // ... so 80 + 10 = 90 lost
  CHECK_FALSE(h.asked);
  commit_in(h, 130);  // 100: a switch's cost
  REQUIRE(h.asked);
  CHECK(said(h, "regroup").find("14 degraded steps since step 5 lost 100 ms") != std::string::npos);
}

TEST_CASE("cheaper, a re-plan in sight: the job stays degraded when the steps until it lose less than a switch") {
  DriverConfig cfg = small_job();
  // steps of 128 ms lose 28 each against a regrouped plan's 100 (50 x 4 / 2): 3 steps left after the
  // first degraded one, 84 ms < 100; the four would have lost 112 ms, a switch's cost, by step 9
  cfg.rebalance_every = 10;
  Harness near = grouped(5, 50, 100, cfg);
  patch_and_commit(near, plan::AfterPatch::cheaper, 120, true);
  near.asked.reset();
  for (int i = 0; i < 4; ++i) commit_in(near, 128);  // steps 6 .. 9, then the rebalance
  CHECK(near.d.steps().committed() == 10);
  CHECK(said(near, "regroup").empty());
  REQUIRE(near.asked);
  CHECK(near.asked->workers == 2);
  CHECK(said(near, "step_patched").find("training on degraded (cheaper)") != std::string::npos);
}

TEST_CASE("cheaper, a damaged group's survivor would sit degraded steps out: regroup at once unless a re-plan is near") {
  // 50 ms steps over 4 ranks; node 3 lost: node 2 would only synchronise, 2 ranks computing against
  // a regrouped plan's 3: about 100 - 67 = 33 ms a step over it
  Harness far = grouped(5, 50, 100);  // 100 steps to run: no re-plan before the job's end
  far.asked.reset();
  patch_and_commit(far, plan::AfterPatch::cheaper, 120);
  CHECK(said(far, "step_patched") ==
        "step 5 committed without 1 lost worker(s), patched 1 time(s); 1 worker(s) of the damaged group(s) would sit "
        "degraded steps out, each step about 33 ms over a regrouped plan's step (66 ms: the 50 ms before x 4 / 3 ranks), "
        "more than a plan switch (100 ms) in the 94 steps to the next re-plan: the survivors regroup at once");
  REQUIRE(far.asked);
  CHECK(far.asked->workers == 3);
  DriverConfig cfg = small_job();
  cfg.rebalance_every = 8;  // 2 steps to the rebalance after step 5: 67 ms < 100
  Harness near = grouped(5, 50, 100, cfg);
  near.asked.reset();
  patch_and_commit(near, plan::AfterPatch::cheaper, 120);
  CHECK(said(near, "step_patched").find("training on degraded (cheaper)") != std::string::npos);
  CHECK_FALSE(near.asked);
}

TEST_CASE("a spread patch whose damaged group's survivor holds every expert: it rejoins the degraded steps, and cheaper stays degraded") {
  // as above (50 ms steps, a 100 ms switch, no re-plan in sight), but every worker holds all four
  // experts: node 2, left of group 1, is a whole model and computes in the degraded steps
  Harness h = grouped(5, 50, 100, small_job(), 4);
  h.asked.reset();
  h.lose(3, "node 3 died");
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);
  h.membership(workers({0, 1, 2}));
  plan::ShardStacks s = stacks({{0, 1}, {}}, {true, false});
  s.spread = true;
  h.on(in::PatchDecided{asks[0].decision, s, "spare gen 1"});
  auto patches = h.sent<wire::StepPatch>();
  REQUIRE(patches.size() == 1);
  CHECK(patches[0].second.damaged == std::vector<uint32_t>{1});
  CHECK(patches[0].second.rejoin == std::vector<uint32_t>{1});
  CHECK(h.note_detail("patch") ==
        "step 5 patch 1: lost 3.0 (group 1): type 1 spread over groups up 0; group 1 computes on with its 1 rank left "
        "in the degraded steps; 3 ranks synchronise (stacks by spare gen 1, depth 2; after it: cheaper)");
  commit_in(h, 120, 1);
  CHECK(said(h, "step_patched").find("training on degraded (cheaper): group(s) 1 out, their shard types computed by "
                                     "the others as patch 1 said (group 1 computes on with its 1 rank left), 3 ranks") !=
        std::string::npos);
  CHECK_FALSE(h.asked);  // no worker sits the degraded steps out: nothing to regroup for
  REQUIRE(h.d.degraded());
  CHECK(h.d.degraded()->rejoined == std::vector<uint32_t>{1});  // job.stacks() says so (groups_rejoined)
  // SPARe's own stacks (the type whole to group 0) keep the survivor out: no even parts to share
  Harness whole = grouped(5, 50, 100, small_job(), 4);
  whole.lose(3, "node 3 died");
  whole.on(in::PatchDecided{whole.all<act::DecidePatch>()[0].decision, stacks({{0, 1}, {}}, {true, false}), "spare gen 1"});
  REQUIRE(whole.sent<wire::StepPatch>().size() == 1);
  CHECK(whole.sent<wire::StepPatch>()[0].second.rejoin.empty());
}

TEST_CASE("regroup: the redundancy policy re-plans the survivors at the patched step's boundary") {
  Harness h = grouped(3, 50, 100);
  h.asked.reset();
  patch_and_commit(h, plan::AfterPatch::regroup, 60);
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 3);
  CHECK(h.sent<wire::StepBegin>().empty());
  CHECK(h.ever<act::RecoveryDone>().size() == 1);
}

TEST_CASE("a loss in a degraded step patches it again, the earlier loss still out") {
  Harness h = grouped(3, 50, 100);
  patch_and_commit(h, plan::AfterPatch::degraded, 60);
  commit_in(h, 60);
  REQUIRE(h.d.steps().next_step() == 5);
  h.lose(2, "node 2 died");  // the dropped group's last rank, still synchronising
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);
  CHECK(asks[0].alive == std::vector<bool>{true, false});
  h.membership(workers({0, 1}));
  h.on(in::PatchDecided{asks[0].decision, stacks({{0, 1}, {}}, {true, false}, false, plan::AfterPatch::degraded)});
  auto p = h.sent<wire::StepPatch>();
  REQUIRE(p.size() == 1);
  CHECK(p[0].second.step == 5);
  CHECK(p[0].second.ranks == std::vector<uint32_t>{0, 1});
  CHECK(p[0].second.damaged == std::vector<uint32_t>{1});
  CHECK(said(h, "patch").find("lost 2.0, 3.0 (group 1)") != std::string::npos);
  commit_in(h, 60, 1);
  auto [to, b] = begun(h);
  CHECK(to.to.size() == 2);
  CHECK(b.kept_step == 5);
  CHECK(b.kept_patch == 1);
  CHECK(h.d.steps().aborted() == 0);
  CHECK(h.d.steps().patched() == 2);
}

TEST_CASE("a loss of both groups in a degraded step is a wipe-out: the step aborts and the ladder re-plans") {
  Harness h = grouped(3, 50, 100);
  patch_and_commit(h, plan::AfterPatch::degraded, 60);
  h.lose(1, "node 1 died");
  auto asks = h.all<act::DecidePatch>();
  REQUIRE(asks.size() == 1);
  CHECK(asks[0].alive == std::vector<bool>{false, false});
  h.on(in::PatchDecided{asks[0].decision, stacks({{}, {}}, {false, false}, true)});
  CHECK(h.d.steps().aborted() == 1);
}

TEST_CASE("a dense snapshot of a degraded step leaves the lost rank out: the others write its units") {
  DriverConfig cfg = small_job();
  cfg.checkpoint_every = 5;
  Harness h = grouped(3, 50, 100, cfg);
  patch_and_commit(h, plan::AfterPatch::degraded, 60);  // step 3
  commit_in(h, 60);                                      // step 4: 5 committed
  auto saves = h.ever<act::Send>();
  std::optional<std::pair<act::Send, wire::SaveCheckpoint>> snap;
  for (const auto& s : saves)
    if (auto* m = std::get_if<wire::SaveCheckpoint>(&s.msg); m && m->snapshot && m->step == 5) snap = {s, *m};
  REQUIRE(snap);
  CHECK(snap->second.absent == std::vector<uint32_t>{3});
  CHECK(snap->first.to.size() == 3);
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
  // the first patch's rendezvous is closed for good, and nothing else of the plan's
  bool first_closed = false, plan_closed = false;
  for (const auto& k : h.all<act::EraseKeys>()) {
    first_closed = first_closed || (k.closed && k.under == "patch-5-1");
    plan_closed = plan_closed || (k.plan == 1 && k.under.empty());
  }
  CHECK(first_closed);
  CHECK_FALSE(plan_closed);
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

TEST_CASE("a loss seen between degraded steps that would restore from the seed waits for the windows' reports, and one that serves is taken") {
  Harness h = grouped(3, 50, 100);
  patch_and_commit(h, plan::AfterPatch::degraded, 60);
  commit_in(h, 60);
  const uint64_t step = h.d.steps().next_step();
  for (NodeId n : {0u, 1u, 2u}) vote(h, {n, 0}, step, 0);  // step 5 commits; its boundary comes next
  REQUIRE(h.d.steps().committed() == step + 1);
  h.asked.reset();
  h.lose(0, "node 0 died");  // group 0 gone too, between steps: a unit only it and node 3 held is lost
  h.lose(1, "node 1 died");
  h.membership(workers({2}));
  CHECK_FALSE(h.asked);  // a plan now would restore the seed: no window is in the reports yet
  CHECK(h.armed(Timer::retry));
  CHECK(h.sent<wire::StepBegin>().empty());
  h.slices(2, 4, 5, 0, 13);  // the report arrives: node 2 holds window 4..5 whole
  h.timer(Timer::retry, 150);
  REQUIRE(h.asked);
  CHECK(h.asked->workers == 1);
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 4);
  CHECK(said(h, "plan").find("workers changed: 0 joined, 2 left (degraded since step 3)") != std::string::npos);
}
