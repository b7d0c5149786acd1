// test_group_order.cpp — the order of a grouped plan's groups that keeps the most group data planes:
// a regroup that would shift every group after the one that lost a worker keeps the others whole
// instead; the identity stands where nothing better exists; an intact group keeps its own index
// where its size allows; groups that are down keep theirs; permute_groups carries each group's
// slot tables, failure domains and stacks with it, and refuses what is not a permutation.
#include <doctest/doctest.h>

#include "plan/group_order.h"

using namespace sal;
using namespace sal::plan;

namespace {

// Workers 0..7 were four groups of two: {0,1} {2,3} {4,5} {6,7}. Worker 3 is lost.
std::vector<IntactGroup> pairs_but_3() { return {{0, {0, 1}}, {2, {4, 5}}, {3, {6, 7}}}; }
const std::vector<uint32_t> kSurvivors{0, 1, 2, 4, 5, 6, 7};

}  // namespace

TEST_CASE("the group that takes the orphaned worker goes where it keeps the other groups whole") {
  // the planner sized them 2, 2, 3 and one down: in that order only {0,1} lines up
  std::vector<uint32_t> sizes{2, 2, 3, 0};
  CHECK(groups_kept(sizes, kSurvivors, pairs_but_3()) == 1);
  auto perm = order_groups(sizes, kSurvivors, pairs_but_3());
  // {0,1} | {2,4,5} | {6,7}: groups of 2, 3, 2 keep two planes (the third group of two is group 1)
  CHECK(perm == std::vector<uint32_t>{0, 2, 1, 3});
  std::vector<uint32_t> arranged;
  for (uint32_t g : perm) arranged.push_back(sizes[g]);
  CHECK(groups_kept(arranged, kSurvivors, pairs_but_3()) == 2);
}

TEST_CASE("the identity stands where no order keeps more, and down groups keep their indices") {
  std::vector<uint32_t> sizes{2, 0, 2, 3};
  auto perm = order_groups({3, 2, 2, 0}, kSurvivors, pairs_but_3());
  CHECK(perm == std::vector<uint32_t>{0, 1, 2, 3});  // {0,1,2} | {4,5} | {6,7}: two kept already
  perm = order_groups(sizes, kSurvivors, pairs_but_3());
  CHECK(perm[1] == 1);                               // down, where it was
  std::vector<uint32_t> arranged;
  for (uint32_t g : perm) arranged.push_back(sizes[g]);
  CHECK(groups_kept(arranged, kSurvivors, pairs_but_3()) == 2);
  // nothing survives whole: nothing to keep
  CHECK(order_groups({2, 2, 3}, kSurvivors, {}) == std::vector<uint32_t>{0, 1, 2});
  // sizes that do not cover the workers: left as they are
  CHECK(order_groups({2, 3}, kSurvivors, pairs_but_3()) == std::vector<uint32_t>{0, 1});
}

TEST_CASE("an intact group keeps its own index where its size allows") {
  // workers were {0,1,2} {3,4} {5,6}; now {5,6} then {3,4} then {0,1,2} in the workers' order
  std::vector<IntactGroup> intact{{0, {0, 1, 2}}, {1, {3, 4}}, {2, {5, 6}}};
  std::vector<uint32_t> order{5, 6, 3, 4, 0, 1, 2};
  auto perm = order_groups({3, 2, 2}, order, intact);
  // positions: a group of 2 (old 2's workers), of 2 (old 1's), of 3 (old 0's); old 1 keeps index 1
  CHECK(perm == std::vector<uint32_t>{2, 1, 0});
  std::vector<uint32_t> arranged{2, 2, 3};
  CHECK(groups_kept(arranged, order, intact) == 3);
}

TEST_CASE("permute_groups moves each group's positions, domains and stacks with it") {
  Plan p;
  p.nodes = 5, p.slots = 1, p.experts = 2;
  p.layers.push_back({{3, 2}, {{0}, {1}, {0}, {1}, {0}}});
  p.groups = {2, 3, 0};
  p.domains = {0, 0, 1, 1, 2};
  p.stacks.redundancy = 2;
  p.stacks.hosts = {{0, 1}, {1, 2}, {2, 0}};
  p.stacks.alive = {true, true, false};
  p.stacks.assignment = {{0}, {1, 2}, {}};
  auto q = permute_groups(p, {1, 0, 2});
  REQUIRE(q.ok());
  CHECK(q->groups == std::vector<uint32_t>{3, 2, 0});
  CHECK(q->layers[0].placement == std::vector<std::vector<ExpertId>>{{0}, {1}, {0}, {0}, {1}});
  CHECK(q->domains == std::vector<uint32_t>{1, 1, 2, 0, 0});
  CHECK(q->stacks.hosts == std::vector<std::vector<uint32_t>>{{1, 2}, {0, 1}, {2, 0}});
  CHECK(q->stacks.alive == std::vector<bool>{true, true, false});
  CHECK(q->stacks.assignment == std::vector<std::vector<uint32_t>>{{1, 2}, {0}, {}});
  CHECK(q->layers[0].replicas == p.layers[0].replicas);
  CHECK(check_groups(*q).ok());
  auto bad = permute_groups(p, {0, 0, 2});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("each group once") != std::string::npos);
  CHECK_FALSE(permute_groups(p, {0, 1}).ok());
}
