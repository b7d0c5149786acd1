// test_groups.cpp — a plan's data-parallel groups: positions per group, which group a position is
// in, the check that every group up holds the whole model (and whether some of a group's positions
// still do), and the groups in plan files.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

using namespace sal;
using namespace sal::plan;

namespace {

// Five positions in groups of 2, 0 (down) and 3; 2 experts, one slot each, one layer.
Plan five() {
  Plan p;
  p.nodes = 5, p.slots = 1, p.experts = 2;
  p.layers.push_back({{2, 3}, {{0}, {1}, {0}, {1}, {1}}});
  p.groups = {2, 0, 3};
  return p;
}

}  // namespace

TEST_CASE("groups are contiguous runs of positions, and a group of none is down") {
  Plan p = five();
  CHECK(group_count(p) == 3);
  CHECK(group_of(p, 0).group == 0);
  CHECK(group_of(p, 1).group == 0);
  auto g = group_of(p, 2);
  CHECK(g.group == 2);
  CHECK(g.first == 2);
  CHECK(g.count == 3);
  CHECK(group_span(p, 1).count == 0);
  CHECK(group_span(p, 2).first == 2);
  CHECK(check_groups(p).ok());
  Plan one = five();
  one.groups.clear();
  CHECK(group_count(one) == 1);
  CHECK(group_of(one, 4).count == 5);
}

TEST_CASE("a group that does not hold every expert, or groups that miss positions, are refused by name") {
  Plan p = five();
  p.layers[0].placement[3] = {0};
  p.layers[0].placement[4] = {0};
  auto s = check_groups(p);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message() == "plan: group 2 (positions 2..4) holds no replica of layer 0 expert 1: a group must hold the whole model");
  Plan q = five();
  q.groups = {2, 2};
  REQUIRE_FALSE(check_groups(q).ok());
  CHECK(check_groups(q).error().message() == "plan: the groups have 4 positions, the plan 5");
}

TEST_CASE("the ranks a group has left after a loss hold a whole model, or the first expert they miss is named") {
  Plan p = five();  // group 2: positions 2 (expert 0), 3 and 4 (expert 1)
  std::vector<std::vector<std::vector<uint32_t>>> counts{replica_counts(p.layers[0], p.experts)};
  CHECK_FALSE(missing_expert(counts, {2, 3, 4}));
  CHECK_FALSE(missing_expert(counts, {2, 4}));  // 3 lost: 4 still holds expert 1
  auto gap = missing_expert(counts, {3, 4});    // 2 lost: none holds expert 0
  REQUIRE(gap);
  CHECK(*gap == std::pair<uint32_t, uint32_t>{0, 0});
  CHECK(missing_expert(counts, {}));
  counts.push_back(counts[0]);
  counts[1][1] = {0, 0, 0, 0, 0};  // layer 1 expert 1 on no position
  CHECK(*missing_expert(counts, {0, 1, 2, 3, 4}) == std::pair<uint32_t, uint32_t>{1, 1});
}

TEST_CASE("a plan file carries its groups") {
  auto back = plan_from_json(nlohmann::json::parse(plan_to_json(five()).dump()));
  REQUIRE(back.ok());
  CHECK(back->groups == std::vector<uint32_t>{2, 0, 3});
  auto bad = nlohmann::json::parse(plan_to_json(five()).dump());
  bad["groups"] = {2, -1};
  REQUIRE_FALSE(plan_from_json(bad).ok());
}
