// test_plan_switch.cpp — from a decided plan to ranks and unit transfers: nothing moves before the
// first commit; a permuted plan moves nothing; after a loss every rank ends up holding exactly what
// the new plan gives it, fetched from surviving holders only, never twice; a fresh worker gets every
// non-expert unit; lost state is an error that names it; a regroup keeps whole the groups that survived.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "job/driver_harness.h"
#include "job/plan_switch.h"

using namespace sal;
using namespace sal::job;
using sal::job::test::workers;

namespace {

// `layers` layers, one slot table per layer (the same for each): positions x slots.
plan::Plan make_plan(std::vector<std::vector<plan::ExpertId>> slots, uint32_t experts, uint32_t layers = 2) {
  plan::Plan p;
  p.nodes = uint32_t(slots.size());
  p.slots = uint32_t(slots[0].size());
  p.experts = experts;
  for (uint32_t l = 0; l < layers; ++l) {
    plan::LayerPlan lp;
    lp.replicas.assign(experts, 0);
    for (auto& s : slots)
      for (auto e : s) ++lp.replicas[e];
    lp.placement = slots;
    p.layers.push_back(lp);
  }
  return p;
}


// What each new rank holds after the switch: its old holdings (if it was a rank) plus what it receives.
std::map<uint32_t, std::set<std::pair<int, int>>> after(const AppliedPlan& old, const PlanSwitch& sw) {
  std::map<uint32_t, std::set<std::pair<int, int>>> held;
  for (uint32_t r = 0; r < sw.ranks.size(); ++r) {
    for (uint32_t o = 0; o < old.ranks.size(); ++o)
      if (old.ranks[o] == sw.ranks[r])
        for (size_t l = 0; l < old.plan.layers.size(); ++l)
          for (auto e : old.plan.layers[l].placement[o]) held[r].insert({int(l), int(e)});
  }
  for (const auto& t : sw.transfers)
    if (t.kind == 3) held[t.to].insert({t.layer, t.expert});
  return held;
}

}  // namespace

TEST_CASE("before the first commit nothing moves: every rank seeds what it holds") {
  auto next = make_plan({{0, 1}, {2, 3}, {0, 2}, {1, 3}}, 4);
  auto sw = switch_plan(std::nullopt, workers({1, 2, 3, 4}), next, 0);
  REQUIRE(sw.ok());
  CHECK(sw->transfers.empty());
  CHECK(sw->ranks.size() == 4);
  CHECK(std::set<Participant>(sw->ranks.begin(), sw->ranks.end()).size() == 4);
}

TEST_CASE("a permuted plan on the same workers moves nothing") {
  AppliedPlan old{workers({1, 2, 3, 4}), make_plan({{0, 1}, {2, 3}, {0, 2}, {1, 3}}, 4), 0};
  auto next = make_plan({{1, 3}, {0, 1}, {0, 2}, {2, 3}}, 4);
  auto sw = switch_plan(old, workers({1, 2, 3, 4}), next, 50);
  REQUIRE(sw.ok());
  CHECK(sw->transfers.empty());
  CHECK(sw->experts_moved == 0);
  CHECK(sw->dense_moved == 0);
  // rank r holds exactly the experts of position r
  auto held = after(old, *sw);
  for (uint32_t r = 0; r < 4; ++r)
    for (auto e : next.layers[0].placement[r]) CHECK(held[r].count({0, int(e)}));
}

TEST_CASE("where it moves no more state, the workers keep their order (their data planes are kept)") {
  // every worker holds every expert: any order moves nothing, and the survivors keep theirs
  AppliedPlan old{workers({1, 2, 3, 4, 5}), make_plan({{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}}, 2), 0};
  auto next = make_plan({{0, 1}, {0, 1}, {0, 1}, {0, 1}}, 2);
  auto sw = switch_plan(old, workers({5, 4, 1, 2}), next, 50);  // 3 lost; the ready list in another order
  REQUIRE(sw.ok());
  CHECK(sw->ranks == workers({1, 2, 4, 5}));
  CHECK(sw->experts_moved == 0);
  // where the order would move more, the greedy remap's ranks stand
  AppliedPlan split{workers({1, 2}), make_plan({{0, 1}, {2, 3}}, 4), 0};
  auto swap = switch_plan(split, workers({1, 2}), make_plan({{2, 3}, {0, 1}}, 4), 50);
  REQUIRE(swap.ok());
  CHECK(swap->ranks == workers({2, 1}));
  CHECK(swap->experts_moved == 0);
}

TEST_CASE("after a worker is lost every rank holds what the new plan gives it, fetched from survivors once") {
  AppliedPlan old{workers({1, 2, 3, 4}), make_plan({{0, 1}, {2, 3}, {0, 2}, {1, 3}}, 4), 10};
  auto next = make_plan({{0, 1, 2}, {2, 3, 0}, {1, 3, 3}}, 4);
  auto sw = switch_plan(old, workers({1, 2, 4}), next, 40);
  REQUIRE(sw.ok());
  std::set<std::tuple<int, int, uint32_t>> seen;
  for (const auto& t : sw->transfers) {
    CHECK(t.kind == 3);
    CHECK(t.from != t.to);
    CHECK(t.from < 3);
    CHECK(t.to < 3);
    CHECK(seen.insert({t.layer, t.expert, t.to}).second);  // never the same unit twice to one rank
    // the sender held it under the old plan
    Participant sender = sw->ranks[t.from];
    bool had = false;
    for (uint32_t o = 0; o < 4; ++o)
      if (old.ranks[o] == sender)
        for (auto e : old.plan.layers[size_t(t.layer)].placement[o]) had |= int(e) == t.expert;
    CHECK(had);
  }
  auto held = after(old, *sw);
  for (uint32_t r = 0; r < 3; ++r)
    for (size_t l = 0; l < 2; ++l)
      for (auto e : next.layers[l].placement[r]) CHECK(held[r].count({int(l), int(e)}));
  CHECK(sw->experts_moved == sw->transfers.size());
  std::map<uint32_t, uint64_t> per_rank;  // what each rank receives: its migration's share of the switch
  for (const auto& t : sw->transfers) ++per_rank[t.to];
  CHECK(!per_rank.empty());
  for (uint32_t r = 0; r < 3; ++r) {
    CHECK(received_by(*sw, r).experts == per_rank[r]);
    CHECK_FALSE(received_by(*sw, r).dense);  // no new worker: experts only
  }
}

TEST_CASE("a worker that joins mid-run receives every non-expert unit, spread over the survivors") {
  AppliedPlan old{workers({1, 2}), make_plan({{0, 1}, {1, 0}}, 2), 0};
  auto next = make_plan({{0, 1}, {1, 0}, {0, 1}}, 2);
  auto sw = switch_plan(old, workers({1, 2, 7}), next, 30);
  REQUIRE(sw.ok());
  int fresh = -1;
  for (uint32_t r = 0; r < 3; ++r)
    if (sw->ranks[r].node == 7) fresh = int(r);
  REQUIRE(fresh >= 0);
  std::multiset<uint8_t> kinds;
  std::set<uint32_t> senders;
  for (const auto& t : sw->transfers)
    if (t.kind != 3) {
      CHECK(int(t.to) == fresh);
      kinds.insert(t.kind);
      senders.insert(t.from);
    }
  CHECK(kinds.count(0) == 1);  // embeddings
  CHECK(kinds.count(1) == 2);  // each layer's dense part
  CHECK(kinds.count(2) == 2);  // each layer's gate
  CHECK(senders.size() == 2);  // both survivors send
  CHECK(sw->dense_moved == 5);
  auto held = after(old, *sw);
  for (size_t l = 0; l < 2; ++l)
    for (auto e : next.layers[l].placement[size_t(fresh)]) CHECK(held[uint32_t(fresh)].count({int(l), int(e)}));
}

TEST_CASE("state with no surviving holder is an error that names it") {
  AppliedPlan old{workers({1, 2, 3}), make_plan({{0, 1}, {2, 3}, {0, 1}}, 4), 0};
  auto next = make_plan({{0, 1, 2, 3}, {0, 1, 2, 3}}, 4);
  auto sw = switch_plan(old, workers({1, 3}), next, 12);  // node 2 held experts 2 and 3 alone
  REQUIRE_FALSE(sw.ok());
  CHECK(sw.error().message().find("expert 2") != std::string::npos);

  auto none = switch_plan(old, workers({8, 9}), make_plan({{0, 1}, {2, 3}}, 4), 12);
  REQUIRE_FALSE(none.ok());
}

TEST_CASE("a regroup orders the groups so that the groups that survived whole keep their ranks (and data planes)") {
  // four groups of two holding every expert each; worker 4 (group 1) is lost
  std::vector<std::vector<plan::ExpertId>> half{{0, 1, 2, 3}, {4, 5, 6, 7}};
  auto pairs = make_plan({half[0], half[1], half[0], half[1], half[0], half[1], half[0], half[1]}, 8);
  pairs.groups = {2, 2, 2, 2};
  AppliedPlan old{workers({1, 2, 3, 4, 5, 6, 7, 8}), pairs, 0};
  // the planner's groups of 2, 2, 3 and one down; the group of three computes two shard types
  auto next = make_plan({half[0], half[1], half[0], half[1], half[0], half[0], half[1]}, 8);
  next.groups = {2, 2, 3, 0};
  next.stacks.assignment = {{0}, {1}, {2, 3}, {}};
  const auto survivors = workers({1, 2, 3, 5, 6, 7, 8});
  Arranged a = arrange_groups(old, survivors, next);
  CHECK(a.order == std::vector<uint32_t>{0, 2, 1, 3});
  CHECK(a.plan.groups == std::vector<uint32_t>{2, 3, 2, 0});
  CHECK(a.plan.stacks.assignment == std::vector<std::vector<uint32_t>>{{0}, {2, 3}, {1}, {}});
  auto sw = switch_plan(old, survivors, a.plan, 40);
  REQUIRE(sw.ok());
  CHECK(sw->ranks == survivors);  // {1,2} | {3,5,6} | {7,8}: two groups' ranks as they were
  CHECK(sw->experts_moved == 0);
  // in the planner's order only {1,2} would have stayed a group
  auto unarranged = switch_plan(old, survivors, next, 40);
  REQUIRE(unarranged.ok());
  CHECK(unarranged->experts_moved >= sw->experts_moved);
  // nothing to arrange: one group, or no grouped plan in force
  CHECK(arrange_groups(std::nullopt, survivors, next).order.empty());
  AppliedPlan flat{workers({1, 2, 3, 4, 5, 6, 7, 8}), make_plan({half[0], half[1], half[0], half[1], half[0], half[1], half[0], half[1]}, 8), 0};
  CHECK(arrange_groups(flat, survivors, next).order.empty());
}

TEST_CASE("rack labels: each host's rack in the order the racks first come, a node in no rack its own") {
  std::vector<Participant> workers = {{3, 0}, {3, 1}, {5, 0}, {7, 0}, {9, 0}, {9, 1}};  // hosts 3, 5, 7, 9
  CHECK(host_labels(workers) == std::vector<uint32_t>{0, 0, 1, 2, 3, 3});
  std::map<NodeId, std::string> rack_of = {{3, "b"}, {5, "a"}, {9, "b"}};
  CHECK(rack_labels(workers, rack_of) == std::vector<uint32_t>{0, 1, 2, 0});  // 7 is in no rack: a rack of its own
  CHECK(rack_labels(workers, {}).empty());
  CHECK(rack_labels(workers, {{11, "a"}}).empty());  // no worker's node is in a rack
}
