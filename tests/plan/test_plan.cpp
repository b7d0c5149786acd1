// test_plan.cpp — plan files and the validators every proposal must pass.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "plan/schedule.h"
#include "plan/validate.h"

using namespace sal;
using namespace sal::plan;

TEST_CASE("a plan file round-trips and unknown keys are named") {
  auto j = nlohmann::json::parse(R"({"layers":[{"replicas":[2,1,1],"placement":[[0,1],[0,2]]}]})");
  auto p = plan_from_json(j);
  REQUIRE(p.ok());
  CHECK(p->nodes == 2);
  CHECK(p->slots == 2);
  CHECK(p->experts == 3);
  auto back = plan_from_json(nlohmann::json::parse(plan_to_json(*p).dump()));
  REQUIRE(back.ok());
  CHECK(back->layers[0].placement == p->layers[0].placement);
  auto bad = plan_from_json(nlohmann::json::parse(R"({"layers":[{"replicas":[1],"placment":[]}]})"));
  CHECK(bad.error().message() == "layers[0].placment: unknown key (expected replicas, placement)");
  CHECK_FALSE(plan_from_json(nlohmann::json::parse(R"({"layers":[{"replicas":[-1]}]})")).ok());
}

TEST_CASE("the floor is lowered when there are too few slots, and says so") {
  CHECK(effective_floor(2, 10, 6, 32).f == 1);
  CHECK(effective_floor(2, 10, 6, 32).note.find("f lowered from 2 to 1") == 0);
  CHECK(effective_floor(2, 10, 8, 32).f == 2);
  CHECK(effective_floor(2, 10, 8, 32).note.empty());
  CHECK(effective_floor(3, 4, 4, 8).f == 2);
}

TEST_CASE("allocation rules") {
  CHECK(check_allocation({2, 1, 1}, 3, 2, 2, 1).ok());
  CHECK(check_allocation({2, 1}, 3, 2, 2, 1).error().message() == "replicas has 2 entries for 3 experts");
  CHECK(check_allocation({3, 0, 1}, 3, 2, 2, 1).error().message().find("expert 1 has no replica") == 0);
  CHECK(check_allocation({2, 1, 1}, 3, 2, 2, 2).error().message().find("below the floor f = 2") != std::string::npos);
  CHECK(check_allocation({1, 1, 1}, 3, 2, 2, 1).error().message().find("must fill the N x c = 2 x 2 = 4 slots") != std::string::npos);
}

TEST_CASE("placement rules") {
  LayerPlan l{{2, 1, 1}, {{0, 1}, {0, 2}}};
  CHECK(check_placement(l, 3, 2, 2, 2).ok());
  LayerPlan same_node{{2, 1, 1}, {{0, 0}, {1, 2}}};
  CHECK(check_placement(same_node, 3, 2, 2, 2).error().message().find("expert 0 spans 1 node(s) but must span at least") == 0);
  CHECK(check_placement(same_node, 3, 2, 2, 1).ok());  // with f = 1 two copies on one node are fine
  LayerPlan miscount{{2, 1, 1}, {{0, 1}, {1, 2}}};
  CHECK(check_placement(miscount, 3, 2, 2, 1).error().message() == "expert 0 is placed 1 times but allocated 2 replicas");
  LayerPlan short_node{{2, 1, 1}, {{0, 1}, {0}}};
  CHECK(check_placement(short_node, 3, 2, 2, 1).error().message() == "node 1 has 1 slots filled, must be 2");
  LayerPlan unknown{{2, 1, 1}, {{0, 1}, {0, 9}}};
  CHECK(check_placement(unknown, 3, 2, 2, 1).error().message().find("holds expert 9") != std::string::npos);
}

TEST_CASE("checkpoint schedules cover every operator exactly once") {
  CHECK(check_schedule({2, 2, {{0, 2}, {1}}}, 3).ok());
  CHECK(check_schedule({1, 5, {{0, 1, 2}}}, 3).ok());
  CHECK(check_schedule({2, 2, {{0, 2}, {2, 1}}}, 3).error().message().find("operator 2 is snapshotted twice") == 0);
  CHECK(check_schedule({2, 2, {{0}, {1}}}, 3).error().message().find("operator 2 is never snapshotted") == 0);
  CHECK(check_schedule({3, 2, {{0}, {1}, {2}}}, 3).error().message().find("period 2 is shorter") == 0);
}

TEST_CASE("sparse snapshots are taken only where a restore from them runs fewer steps again than from the dense ones") {
  const CheckpointSchedule w1{1, 1, {{0, 1, 2}}}, w2{2, 2, {{0, 2}, {1}}}, w1p5{1, 5, {{0, 1, 2}}};
  CHECK(sparse_rerun_steps(w1) == 1.0);
  CHECK(sparse_rerun_steps(w2) == 2.5);
  CHECK(sparse_rerun_steps(w1p5) == 3.0);
  CHECK(dense_rerun_steps(5) == 2.0);
  // dense every 5 steps: a window of 1 comes out ahead (1 < 2), a window of 2 does not (2.5)
  CHECK(sparse_not_taken(w1, 5, false).empty());
  std::string why = sparse_not_taken(w2, 5, false);
  CHECK(why.find("window of 2 (period 2) would run 2.5 steps again on average") != std::string::npos);
  CHECK(why.find("dense snapshots every 5 steps 2.0") != std::string::npos);
  CHECK_FALSE(sparse_not_taken(w1p5, 5, false).empty());  // a window every 5th iteration: 3 steps
  CHECK(sparse_not_taken(w1p5, 10, false).empty());        // against 4.5
  // a tie goes to the dense snapshots: the sparse ones cost every iteration
  CHECK_FALSE(sparse_not_taken(w1, 3, false).empty());
  // no dense snapshots, or upstream logs (a rebuild runs no step again): always taken
  CHECK(sparse_not_taken(w2, 0, false).empty());
  CHECK(sparse_not_taken(w2, 2, true).empty());
}

TEST_CASE("shard stacks: hosted, computed once, wipe-outs declared") {
  ShardStacks s;
  s.hosts = {{0, 1}, {1, 2}, {2, 0}};
  s.alive = {true, false, true};
  s.assignment = {{0, 1}, {}, {2}};
  CHECK(check_stacks(s, 3).ok());
  CHECK(s.depth() == 2);
  s.assignment = {{0, 1}, {}, {2, 0}};
  CHECK(check_stacks(s, 3).error().message().find("shard type 0 is computed twice") == 0);
  s.assignment = {{0}, {}, {2}};
  CHECK(check_stacks(s, 3).error().message() == "shard type 1 is computed by no group");
  s.alive = {false, false, true};
  s.assignment = {{}, {}, {2}};
  CHECK(check_stacks(s, 3).error().message().find("does not declare a wipe-out") != std::string::npos);
  s.wipeout = true;
  CHECK(check_stacks(s, 3).ok());
}

TEST_CASE("shard stacks: redundant when some type has two hosts, not when a group only hosts two types") {
  ShardStacks s;
  s.hosts = {{0, 1}, {1, 2}, {2, 0}};  // SPARe's r = 2
  CHECK(s.redundant());
  s.hosts = {{0, 3}, {1}, {2}, {}};  // four types over three groups, each hosted once (depth 2)
  CHECK_FALSE(s.redundant());
  s.hosts = {{0}, {1}, {2}, {3}};  // one type a group
  CHECK_FALSE(s.redundant());
  s.hosts = {{0}, {1}, {1}};
  CHECK(s.redundant());
  s.hosts = {};
  CHECK_FALSE(s.redundant());
}
