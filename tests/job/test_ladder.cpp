// test_ladder.cpp — the recovery ladder: which workers a plan uses and when it restores, per mode;
// the baselines' fixed expert-parallel plans; state that lost every holder; the snapshot book.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ckpt/book.h"
#include "ckpt/format.h"
#include "job/ladder.h"
#include "plan/fixed_ep.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::job;

namespace {

std::vector<Participant> ranks_on(std::initializer_list<uint32_t> nodes) {
  std::vector<Participant> out;
  for (auto n : nodes) out.push_back({NodeId(n), 0});
  return out;
}

// 4 ranks, 8 experts, 2 slots: fixed EP with ep = 4 (one group)... here 2 groups of ep 2 (4 slots).
AppliedPlan applied_fixed(std::vector<Participant> ranks, uint32_t slots) {
  auto p = plan::fixed_ep_plan(1, 8, slots, uint32_t(ranks.size()) / plan::ep_size(8, slots));
  REQUIRE(p.ok());
  p->version = 1;
  return AppliedPlan{std::move(ranks), *p, 0};
}

}  // namespace

TEST_CASE("fixed expert-parallel plans: ep = ceil(E / slots), each member a slice, groups copies") {
  CHECK(plan::ep_size(8, 4) == 2);
  CHECK(plan::ep_size(8, 3) == 3);
  auto p = plan::fixed_ep_plan(2, 8, 4, 3);
  REQUIRE(p.ok());
  CHECK(p->nodes == 6);
  CHECK(p->floor == 3);
  CHECK(p->layers[1].placement[0] == std::vector<uint32_t>{0, 1, 2, 3});
  CHECK(p->layers[1].placement[1] == std::vector<uint32_t>{4, 5, 6, 7});
  CHECK(p->layers[1].placement[4] == p->layers[1].placement[0]);
  CHECK(p->layers[0].replicas == std::vector<uint32_t>(8, 3));
  auto odd = plan::fixed_ep_plan(1, 8, 3, 1);  // slices of 3, 3, 2 (the last cycles to fill)
  REQUIRE(odd.ok());
  CHECK(odd->layers[0].placement[2] == std::vector<uint32_t>{6, 7, 6});
  CHECK_FALSE(plan::fixed_ep_plan(1, 8, 4, 0).ok());
}

TEST_CASE("elastic uses every ready worker and restores only when some state lost every holder") {
  auto ranks = ranks_on({1, 2, 3, 4});
  AppliedPlan a{ranks, {}, 0};
  a.plan.version = 1;
  a.plan.layers.push_back({{2, 2, 2, 2}, {{0, 1}, {2, 3}, {0, 1}, {2, 3}}});
  std::optional<AppliedPlan> cur = a;
  auto c = choose_workers("elastic", 2, ranks_on({1, 2, 3}), cur, 10, {});
  CHECK(c.use == ranks_on({1, 2, 3}));
  CHECK_FALSE(c.restore());
  c = choose_workers("elastic", 2, ranks_on({1, 2}), cur, 10, {});  // nodes 3 and 4 held the other copies
  CHECK_FALSE(c.restore());
  c = choose_workers("elastic", 2, ranks_on({2, 4}), cur, 10, {});  // experts 0 and 1 are gone
  CHECK(c.restore());
  CHECK(c.why == "every copy lost: layer 0 expert 0, layer 0 expert 1");
  CHECK_FALSE(choose_workers("elastic", 2, ranks_on({2, 4}), cur, 0, {}).restore());  // nothing committed yet
  CHECK(lost_state(cur, ranks_on({5})) ==
        std::vector<std::string>{"the non-expert units", "layer 0 expert 0", "layer 0 expert 1", "layer 0 expert 2",
                                 "layer 0 expert 3"});
}

TEST_CASE("fixed-ep-ft: whole groups only, and a restore when no whole group of the plan survives") {
  std::optional<AppliedPlan> cur = applied_fixed(ranks_on({1, 2, 3, 4}), 4);  // groups {1,2} and {3,4}
  auto c = choose_workers("fixed-ep-ft", 2, ranks_on({1, 2, 4}), cur, 10, {});
  CHECK(c.use == ranks_on({1, 2}));  // node 4 idles: half a group
  CHECK_FALSE(c.restore());
  c = choose_workers("fixed-ep-ft", 2, ranks_on({1, 3, 5, 6}), cur, 10, {});
  CHECK(c.use == ranks_on({1, 3, 5, 6}));
  CHECK(c.restore());  // each group lost a member, though every expert still has a holder
  // a whole group comes first, whatever the rank order: {3,4} survives, 1 is the odd one out
  c = choose_workers("fixed-ep-ft", 2, ranks_on({1, 3, 4}), cur, 10, {});
  CHECK(c.use == ranks_on({3, 4}));
  CHECK_FALSE(c.restore());
  c = choose_workers("fixed-ep-ft", 2, ranks_on({1}), cur, 10, {});
  CHECK(c.use.empty());
  CHECK(c.why.find("fewer than one expert-parallel group of 2") != std::string::npos);
}

TEST_CASE("checkpoint-restart: any change of the workers in use restarts from the checkpoint") {
  std::optional<AppliedPlan> cur = applied_fixed(ranks_on({1, 2, 3, 4}), 4);
  CHECK_FALSE(choose_workers("checkpoint-restart", 2, ranks_on({1, 2, 3, 4}), cur, 10, {}).restore());
  CHECK_FALSE(choose_workers("checkpoint-restart", 2, ranks_on({1, 2, 3, 4, 5}), cur, 10, {}).restore());  // half a group joined
  CHECK(choose_workers("checkpoint-restart", 2, ranks_on({1, 2, 3}), cur, 10, {}).restore());
  CHECK(choose_workers("checkpoint-restart", 2, ranks_on({1, 2, 3, 4, 5, 6}), cur, 10, {}).restore());
}

// The names of units [from, from + n) of an 11-unit book's model.
static std::vector<std::string> units(int from, int n) {
  std::vector<std::string> out;
  for (int i = from; i < from + n; ++i) out.push_back("unit" + std::to_string(i));
  return out;
}

TEST_CASE("the snapshot book: complete once some rank wrote every unit, dropped when no rank left can") {
  std::string root = sal::test::temp_dir("snap");
  ckpt::SnapshotBook book(root, 11, 2);
  auto r = ranks_on({1, 2});
  std::string dir = book.begin(10, r);
  CHECK(dir == root + "/step-10");
  std::filesystem::create_directories(dir);
  auto a = book.answer(r[0], 10, true, {units(0, 6), 600, 0.5, 3}, "");
  REQUIRE(a.ok());
  CHECK_FALSE(a->has_value());
  auto b = book.answer(r[1], 10, true, {units(6, 5), 500, 0.7, 2}, "");
  REQUIRE(b.ok());
  REQUIRE(b->has_value());
  CHECK((*b)->snapshot.units == 11);
  CHECK((*b)->snapshot.slowest_copy_ms == 0.7);
  CHECK((*b)->snapshot.bytes == 1100);
  CHECK(book.latest()->step == 10);
  REQUIRE(ckpt::mark_complete((*b)->snapshot).ok());  // the controller marks it on disk
  CHECK(std::ifstream(dir + "/complete").good());

  // a writer lost: the snapshot is dropped only when the ranks left cannot cover its units
  book.begin(20, r);
  CHECK(book.drop_waiting_on_lost(ranks_on({1})) == std::vector<uint64_t>{});  // rank 1 still writes
  auto alone = book.answer(r[0], 20, true, {units(0, 6), 0, 0, 0}, "");
  CHECK_FALSE(alone.ok());  // the last rank answered: 6 of 11
  CHECK(alone.error().message().find("6 of the model's 11 units") != std::string::npos);
  book.begin(25, r);
  (void)book.answer(r[0], 25, true, {units(0, 6), 0, 0, 0}, "");
  CHECK(book.drop_waiting_on_lost(ranks_on({1})) == std::vector<uint64_t>{25});

  // two copies of each unit: the loss of either writer leaves a complete snapshot
  auto three = ranks_on({1, 2, 3});
  book.begin(30, three);
  CHECK(book.drop_waiting_on_lost(ranks_on({1, 3})) == std::vector<uint64_t>{});  // rank 2 lost
  (void)book.answer(three[0], 30, true, {units(0, 8), 0, 0, 0}, "");
  auto covered = book.answer(three[2], 30, true, {units(4, 7), 0, 0, 0}, "");
  REQUIRE(covered.ok());
  REQUIRE(covered->has_value());
  CHECK((*covered)->snapshot.units == 11);  // distinct units, the overlap counted once

  // complete as soon as every unit is written: a later rank's answer is not waited for
  book.begin(35, three);
  (void)book.answer(three[0], 35, true, {units(0, 6), 0, 0, 0}, "");
  auto early = book.answer(three[1], 35, true, {units(5, 6), 0, 0, 0}, "");
  REQUIRE(early.ok());
  CHECK(early->has_value());
  auto late = book.answer(three[2], 35, true, {units(0, 11), 0, 0, 0}, "");
  REQUIRE(late.ok());
  CHECK_FALSE(late->has_value());

  // a failed writer: the message names it once nobody else can cover the rest
  book.begin(40, r);
  auto failed = book.answer(r[0], 40, false, {}, "disk full");
  REQUIRE(failed.ok());  // rank 2 may still write everything
  auto short_units = book.answer(r[1], 40, true, {units(6, 5), 0, 0, 0}, "");
  REQUIRE_FALSE(short_units.ok());
  CHECK(short_units.error().message().find("disk full") != std::string::npos);
  CHECK(book.latest()->step == 35);

  // the newest two complete snapshots are kept: another drops the oldest
  auto done = [&](uint64_t step) {
    book.begin(step, r);
    (void)book.answer(r[0], step, true, {units(0, 6), 0, 0, 0}, "");
    return book.answer(r[1], step, true, {units(6, 5), 0, 0, 0}, "");
  };
  auto d50 = done(50);
  REQUIRE(d50.ok());
  REQUIRE(d50->has_value());
  CHECK((*d50)->dropped == std::vector<std::string>{root + "/step-30"});
}
