// test_digests.cpp — catching corruption (job/digests.h, driver_digests.cpp): which copies of a
// unit disagree and which is the majority's; the repair transfers a switch gets; and the driver's
// story — a disagreement aborts the step before it commits, the plan in force is made again with
// the majority's copy sent to the odd holder, and the step runs again; with no majority, a restore.
#include <doctest/doctest.h>

#include "job/digests.h"
#include "job/driver_harness.h"

using namespace sal;
using namespace sal::job;
using namespace sal::job::test;

namespace {

Participant worker_n(uint32_t node) { return {NodeId(node), 0}; }

// Every voter holds `unit` with digest 7, but those in `odd`, whose digest is 8 + their node.
DigestVotes unit_votes(uint32_t unit, std::initializer_list<uint32_t> holders, std::initializer_list<uint32_t> odd) {
  DigestVotes v;
  for (uint32_t n : holders) {
    const bool bad = std::find(odd.begin(), odd.end(), n) != odd.end();
    v[worker_n(n)].push_back({unit, bad ? 8u + n : 7u});
  }
  return v;
}

// A vote on `step` carrying digests: every unit index in `units` with digest 7, but `odd_unit` 99.
const std::vector<Action>& digest_vote(Harness& h, Participant p, uint64_t step, const std::vector<uint32_t>& units,
                                       std::optional<uint32_t> odd_unit = std::nullopt) {
  wire::StepVote v;
  v.node_id = p.node, v.index = p.index, v.epoch = h.d.steps().epoch(), v.step = step, v.ok = true;
  v.ce_sum = 2.0 * 64, v.tokens = 64, v.lr = 1e-3, v.grad_norm = 1;
  v.loads.assign(2 * 4, 8);
  for (uint32_t u : units) v.digests.push_back({u, odd_unit == u ? 99u : 7u});
  return h.on(in::Vote{v});
}

constexpr uint32_t kEmbedding = 0;      // model_units' order: the embeddings first,
constexpr uint32_t kLayer0Expert0 = 3;  // then layer 0's dense part, gate, experts 0..3

}  // namespace

TEST_CASE("digests: copies that agree say nothing, and a unit with one holder cannot disagree") {
  CHECK(compare_digests(unit_votes(kEmbedding, {0, 1, 2}, {})).empty());
  CHECK(compare_digests(unit_votes(kEmbedding, {0}, {0})).empty());
  CHECK(compare_digests({}).empty());
}

TEST_CASE("digests: one odd copy among three is repaired from the two that agree") {
  auto found = compare_digests(unit_votes(kLayer0Expert0, {0, 1, 2}, {1}));
  REQUIRE(found.size() == 1);
  CHECK(found[0].unit == kLayer0Expert0);
  CHECK(found[0].has_majority());
  CHECK(found[0].majority == std::vector<Participant>{worker_n(0), worker_n(2)});
  CHECK(found[0].odd == std::vector<Participant>{worker_n(1)});
  CHECK(describe(found[0], small_job().model) ==
        "layer0.expert0: worker 1.0 disagrees with the 2 holders of the majority's copy (0.0, 2.0)");
}

TEST_CASE("digests: two holders that disagree, or a tie, have no majority") {
  auto two = compare_digests(unit_votes(kLayer0Expert0, {0, 2}, {2}));
  REQUIRE(two.size() == 1);
  CHECK_FALSE(two[0].has_majority());
  CHECK(two[0].odd == std::vector<Participant>{worker_n(0), worker_n(2)});
  CHECK(describe(two[0], small_job().model).find("no copy is held by a majority") != std::string::npos);
  auto tie = compare_digests(unit_votes(kEmbedding, {0, 1, 2, 3}, {2, 3}));  // 7, 7, 10, 11: two of four agree
  REQUIRE(tie.size() == 1);
  CHECK_FALSE(tie[0].has_majority());
}

TEST_CASE("digests: the repairs go from the majority's holders to the odd ones, and no transfer comes from an odd copy") {
  auto rec = dealt_plan(6, 2);  // experts 0 and 1 of each layer on ranks 0, 2, 4
  PlanSwitch sw;
  sw.ranks = {worker_n(0), worker_n(1), worker_n(2), worker_n(3), worker_n(4), worker_n(5)};
  sw.transfers.push_back({uint8_t(UnitKind::embedding), -1, -1, 1, 5});  // from the odd copy: must change
  Repair embedding{kEmbedding, {worker_n(0), worker_n(2)}, {worker_n(1)}};
  Repair expert{kLayer0Expert0, {worker_n(0), worker_n(4)}, {worker_n(2), worker_n(3)}};  // 3 holds no expert 0
  auto added = add_repairs(sw, rec.plan, {embedding, expert}, small_job().model);
  REQUIRE(added.ok());
  CHECK(*added == 2);
  REQUIRE(sw.transfers.size() == 3);
  CHECK(sw.transfers[0].from != 1);
  CHECK(sw.transfers[1].kind == uint8_t(UnitKind::embedding));
  CHECK(sw.transfers[1].to == 1);
  CHECK((sw.transfers[1].from == 0 || sw.transfers[1].from == 2));
  CHECK(sw.transfers[2].kind == uint8_t(UnitKind::expert));
  CHECK(sw.transfers[2].to == 2);
  CHECK((sw.transfers[2].from == 0 || sw.transfers[2].from == 4));
  // the good copy gone with its workers: no repair can be made
  PlanSwitch without;
  without.ranks = {worker_n(1), worker_n(3)};
  auto none = add_repairs(without, dealt_plan(2, 3).plan, {embedding}, small_job().model);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("embedding") != std::string::npos);
}

TEST_CASE("a unit whose digest disagrees on one worker: the step aborts before it commits, the plan in force is made again with the majority's copy sent to it, the step runs again") {
  Harness h(small_job(6));
  h.start(workers({0, 1, 2, 3, 4, 5}));
  h.commit_step();
  REQUIRE(h.d.steps().committed() == 1);
  // step 1: worker 2's copy of the embeddings disagrees with the five others'
  for (uint32_t n : {0, 1, 3, 4, 5}) digest_vote(h, worker_n(n), 1, {kEmbedding});
  CHECK(h.d.steps().in_flight());
  digest_vote(h, worker_n(2), 1, {kEmbedding}, kEmbedding);
  CHECK_FALSE(h.d.steps().in_flight());
  CHECK(h.d.steps().committed() == 1);  // nothing committed
  CHECK(h.sent<wire::StepCommit>().empty());
  REQUIRE(h.sent<wire::StepAbort>().size() == 1);
  CHECK(h.noted("unit_corrupt"));
  CHECK(h.d.corrupt_copies().size() == 1);
  CHECK(h.d.corrupt_copies().at(worker_n(2)) == 1);
  CHECK(h.note_detail("unit_corrupt") ==
        "step 1: embedding: worker 2.0 disagrees with the 5 holders of the majority's copy (0.0, 1.0, 3.0, 4.0, 5.0); "
        "the odd copies are repaired from the majority's and the step runs again");
  REQUIRE(h.asked);  // the cause is known: the plan is asked for at once, with no settling pause
  CHECK(h.asked->keep.has_value());  // the same workers: the plan in force again
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.step == 1);
  CHECK_FALSE(u[0].second.restore);
  REQUIRE(u[0].second.transfers.size() == 1);
  const auto& t = u[0].second.transfers[0];
  CHECK(t.kind == uint8_t(UnitKind::embedding));
  CHECK(u[0].second.ranks[t.to].node == 2);
  CHECK(u[0].second.ranks[t.from].node != 2);
  h.all_ready();
  CHECK(h.noted("repaired"));
  CHECK(h.d.steps().next_step() == 1);
  h.commit_step();  // the digests agree now (the votes carry none): step 1 commits
  CHECK(h.d.steps().committed() == 2);
}

TEST_CASE("a unit whose two holders disagree: no copy can be told good, the model is restored") {
  Harness h(small_job(4));
  h.start(workers({0, 1, 2, 3}));
  h.commit_step();
  h.commit_step();
  // layer 0 expert 0 is on workers 0 and 2 only
  digest_vote(h, worker_n(0), 2, {kEmbedding, kLayer0Expert0});
  digest_vote(h, worker_n(1), 2, {kEmbedding});
  digest_vote(h, worker_n(3), 2, {kEmbedding});
  digest_vote(h, worker_n(2), 2, {kEmbedding, kLayer0Expert0}, kLayer0Expert0);
  CHECK(h.d.steps().committed() == 2);
  CHECK(h.note_detail("unit_corrupt").find("no copy can be told good: the model is restored") != std::string::npos);
  CHECK(h.armed(Timer::retry));  // a restore waits for the agents' reports of their windows to settle
  h.timer(Timer::retry, 50);
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore);
  h.all_ready();
  CHECK(h.noted("repaired"));
}

TEST_CASE("a restore for copies that disagree from a window of the step they are at fetches every unit again") {
  Harness h(small_job(4));
  h.start(workers({0, 1, 2, 3}));
  h.commit_step();
  h.commit_step();
  for (NodeId n : {1, 3}) h.slices(n, 1, 1, 0, 13);  // the window of step 1: the state the workers hold
  h.asked.reset();
  digest_vote(h, worker_n(0), 2, {kEmbedding, kLayer0Expert0});
  digest_vote(h, worker_n(1), 2, {kEmbedding});
  digest_vote(h, worker_n(3), 2, {kEmbedding});
  digest_vote(h, worker_n(2), 2, {kEmbedding, kLayer0Expert0}, kLayer0Expert0);
  if (!h.asked) h.timer(Timer::retry, 150);
  h.decide();
  auto u = h.sent<wire::PlanUpdate>();
  REQUIRE(u.size() == 1);
  CHECK(u[0].second.restore_window == 1);
  CHECK_FALSE(u[0].second.restore_keeps);  // a holder's own copy of layer 0 expert 0 is the damaged one
}

TEST_CASE("digests that agree change nothing: the step commits") {
  Harness h(small_job(4));
  h.start(workers({0, 1, 2, 3}));
  for (uint32_t n : {0, 1, 2, 3}) digest_vote(h, worker_n(n), 0, {kEmbedding, 1, 2});
  CHECK(h.d.steps().committed() == 1);
  CHECK_FALSE(h.noted("unit_corrupt"));
}
