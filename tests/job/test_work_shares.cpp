// test_work_shares.cpp — the workers' shares of the work (job/work_shares.h) and the driver's
// health policy round trip, as pure logic: a worker that computes twice as long as the others is
// named slow, the driver asks the health policy (act::DecideHealth) with its ratio, the answer's
// shares go out with the next StepBegin in thousandths, a drain becomes act::Drain, and the
// shares of a worker that left are forgotten. Also the integer split they rest on (core/apportion.h).
#include <doctest/doctest.h>

#include "core/apportion.h"
#include "driver_harness.h"
#include "job/work_shares.h"

using namespace sal;
using namespace sal::job;
using namespace sal::job::test;

TEST_CASE("apportion: in proportion to the weights, in integers, even as before with equal weights") {
  CHECK(apportion(10, {1, 1, 1}) == std::vector<uint64_t>{4, 3, 3});  // the first take the extra one
  CHECK(apportion(30, {1000, 500, 1000}) == std::vector<uint64_t>{12, 6, 12});
  CHECK(apportion(7, {2, 1}) == std::vector<uint64_t>{5, 2});  // 4.67, 2.33: the larger remainder first
  CHECK(apportion(5, {0, 0}) == std::vector<uint64_t>{0, 0});
  uint64_t sum = 0;
  for (uint64_t n : apportion(1000003, {3, 7, 11, 13})) sum += n;
  CHECK(sum == 1000003);
  // contiguous shares: in order, and at least one item each while there are enough
  CHECK(contiguous_share(16, {1000, 500, 1000, 1000}, 1) == std::pair<uint64_t, uint64_t>{5, 2});
  CHECK(contiguous_share(4, {1000, 50, 1000, 1000}, 1) == std::pair<uint64_t, uint64_t>{1, 1});
  CHECK(contiguous_share(4, {1000, 50, 1000, 1000}, 3).second == 1);
  CHECK(contiguous_share(8, {0, 0}, 1) == std::pair<uint64_t, uint64_t>{4, 4});  // no weights: even
}

TEST_CASE("work shares: asked when a verdict changes and every half window while a share is below even") {
  WorkShares s;
  SpeedWatch speed;
  const auto ranks = workers({1, 2, 3});
  CHECK_FALSE(s.due(10, false, 20, {}));
  CHECK(s.due(10, true, 20, {}));
  auto in = s.ask(7, 10, ranks, speed, 2);
  REQUIRE(in.workers.size() == 3);
  CHECK(in.workers[1].name == "2.0");
  CHECK(in.min_workers == 2);
  CHECK_FALSE(s.answers(6));
  REQUIRE(s.answers(7));
  policy::HealthProposal p{{1, 0.5, 1}, {}, "2.0 at 2x"};
  auto a = s.apply(p);
  CHECK(a.changed);
  CHECK(a.text == "2.0 0.50");
  CHECK_FALSE(s.answers(7));  // answered once
  CHECK(s.for_step(ranks) == std::vector<uint32_t>{1000, 500, 1000});
  CHECK_FALSE(s.due(19, false, 20, {}));
  CHECK(s.due(20, false, 20, {}));  // a share below even: looked at again after half a window
  // the same answer again changes nothing; a drain names the node once
  s.ask(8, 20, ranks, speed, 2);
  a = s.apply(policy::HealthProposal{{1, 0.5, 1}, {1}, "drain"});
  CHECK_FALSE(a.changed);
  CHECK(a.drain == std::vector<NodeId>{2});
  s.keep_only(workers({1, 3}));  // 2.0 left
  CHECK(s.for_step(workers({1, 3})).empty());
}

namespace {

// A vote whose times say the worker computes `slowdown` times as long as an even worker would.
wire::StepVote timed_vote(Harness& h, Participant p, uint64_t step, double slowdown) {
  wire::StepVote v;
  v.node_id = p.node, v.index = p.index, v.epoch = h.d.steps().epoch(), v.step = step, v.ok = true;
  v.ce_sum = 2.0 * 64, v.tokens = 64, v.lr = 1e-3, v.grad_norm = 1;
  v.loads.assign(2 * 4, 8);
  v.busy_ms = 40 * slowdown, v.exchange_ms = 5, v.sync_ms = 5, v.update_ms = 1;
  v.busy_cpu_ms = 40 * slowdown, v.expert_cpu_ms = 10 * slowdown, v.expert_rows = 128, v.process_cpu_ms = 40 * slowdown;
  return v;
}

// Commits the step in flight with worker `slow` at `slowdown`; the actions of the last vote.
std::vector<Action> commit_timed(Harness& h, Participant slow, double slowdown) {
  const uint64_t step = h.d.steps().next_step();
  std::vector<Participant> who(h.d.steps().participants().begin(), h.d.steps().participants().end());
  std::vector<Action> last;
  for (const auto& p : who) last = h.on(in::Vote{timed_vote(h, p, step, p == slow ? slowdown : 1)});
  REQUIRE(h.d.steps().committed() == step + 1);
  h.timer(Timer::soon);
  return last;
}

// Commits steps with worker `slow` at `slowdown` until the driver asks the health policy, at most
// `most` of them; the question (none: not asked), and in *steps how many were committed.
std::optional<act::DecideHealth> until_asked(Harness& h, Participant slow, double slowdown, int most,
                                             int* steps = nullptr) {
  std::optional<act::DecideHealth> asked;
  int i = 0;
  for (; i < most && !asked; ++i)
    for (const auto& a : commit_timed(h, slow, slowdown))
      if (auto* d = std::get_if<act::DecideHealth>(&a)) asked = *d;
  if (steps) *steps = i;
  return asked;
}

// Workers 1..4 start, 2.0 at half the others' speed until the health policy is asked: the question,
// which names 2.0 (the second worker) slow.
act::DecideHealth asked_about_slow(Harness& h) {
  h.start(workers({1, 2, 3, 4}));
  auto asked = until_asked(h, {2, 0}, 2.0, 40);
  REQUIRE(asked);
  REQUIRE(asked->input.workers.size() == 4);
  REQUIRE(asked->input.workers[1].slow);
  return *asked;
}

}  // namespace

TEST_CASE("driver: a slow worker is named, the health policy asked, its shares sent with the next steps") {
  Harness h;
  const Participant slow{2, 0};
  auto asked = asked_about_slow(h);
  CHECK(asked.input.workers[1].name == "2.0");
  CHECK(asked.input.workers[1].ratio == doctest::Approx(2.0).epsilon(0.05));
  CHECK_FALSE(asked.input.workers[0].slow);
  CHECK(asked.input.min_workers == 4);  // 4 experts x floor 2 in 2 slots each
  // the answer: half a share for 2.0
  h.on(in::HealthDecided{asked.decision, {{1, 0.5, 1, 1}, {}, "2.0 at 2.00x: share 0.50"}, "lighten gen 1"});
  CHECK(h.noted("work_shares"));
  CHECK(h.note_detail("work_shares").find("lighten gen 1: 2.0 at 2.00x") != std::string::npos);
  // a stale answer changes nothing
  h.on(in::HealthDecided{asked.decision, {{0.2, 1, 1, 1}, {}, "late"}, "lighten gen 1"});
  CHECK_FALSE(h.noted("work_shares"));
  // the steps from now on carry the shares (the step in flight began before the answer)
  commit_timed(h, slow, 2.0);
  auto begun = h.sent<wire::StepBegin>();
  REQUIRE(begun.size() == 1);
  CHECK(begun[0].second.shares == std::vector<uint32_t>{1000, 500, 1000, 1000});
}

TEST_CASE("driver: a slow worker whose share the policy kept is looked at again every half window") {
  // the policy may keep a named worker's share (its lag in range when asked); it is asked again
  // while the worker stays slow, not only when the verdict changes (t1000 saw one never lightened)
  Harness h;
  const Participant slow{2, 0};
  auto asked = asked_about_slow(h);
  h.on(in::HealthDecided{asked.decision, {{1, 1, 1, 1}, {}, "2.0 at 2.00x, lag 1.00: share 1.00"}, "lighten gen 1"});
  CHECK_FALSE(h.noted("work_shares"));  // nothing changed
  int steps = 0;
  auto again = until_asked(h, slow, 2.0, 10, &steps);
  REQUIRE(again);
  CHECK(steps == 10);  // half the speed watch's window of 20
  CHECK(again->input.workers[1].slow);
}

TEST_CASE("driver: the health policy's drain is the controller's to do, once per node") {
  Harness h;
  h.start(workers({1, 2, 3, 4, 5}));
  auto asked = until_asked(h, {5, 0}, 5.0, 40);
  REQUIRE(asked);
  h.on(in::HealthDecided{asked->decision, {{1, 1, 1, 1, 0.2}, {4}, "5.0 at 5x for long: drained"}, "lighten gen 1"});
  auto drains = h.all<act::Drain>();
  REQUIRE(drains.size() == 1);
  CHECK(drains[0].node == 5);
  CHECK(h.noted("node_drained"));
}

TEST_CASE("work shares: a copy found corrupt since the last question is a reason to ask, and the policy hears the count") {
  WorkShares s;
  SpeedWatch speed;
  const auto ranks = workers({1, 2, 3});
  std::map<Participant, uint64_t> corrupt;
  CHECK_FALSE(s.due(10, false, 20, corrupt));
  corrupt[{2, 0}] = 1;
  REQUIRE(s.due(10, false, 20, corrupt));
  auto in = s.ask(3, 10, ranks, speed, 2, corrupt);
  CHECK(in.workers[1].corrupt == 1);
  CHECK(in.workers[0].corrupt == 0);
  CHECK_FALSE(s.due(11, false, 20, corrupt));  // the same count: asked already
  corrupt[{2, 0}] = 2;
  CHECK(s.due(12, false, 20, corrupt));
}
