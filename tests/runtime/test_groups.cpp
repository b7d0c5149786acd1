// test_groups.cpp — a worker's role in a grouped plan: its group, its place there, the shard types
// its group computes, the group's own replica table, and the sequences of each type it takes —
// every sequence of the global batch exactly once over the types and the group's ranks, also where a damaged
// group's ranks left rejoin the degraded steps as a group of their own.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/groups.h"

using namespace sal;
using namespace sal::runtime;

namespace {

plan::Plan four_in_two() {
  plan::Plan p;
  p.nodes = 4, p.slots = 1, p.experts = 2;
  p.layers.push_back({{2, 2}, {{0}, {1}, {1}, {0}}});
  p.groups = {2, 2};
  p.stacks.redundancy = 2;
  p.stacks.hosts = {{0, 1}, {1, 0}};
  p.stacks.alive = {true, true};
  p.stacks.assignment = {{0, 1}, {}};
  return p;
}

}  // namespace

TEST_CASE("a rank's role: its group, its place in it, the group's types and replicas") {
  plan::Plan p = four_in_two();
  std::vector<Counts> replicas = {{{1, 0, 0, 1}, {0, 1, 1, 0}}};
  GroupRole r = group_role(p, replicas, 3);
  CHECK(r.groups == 2);
  CHECK(r.span.group == 1);
  CHECK(r.local_rank == 1);
  CHECK(r.types.empty());
  CHECK(r.replicas[0] == Counts{{0, 1}, {1, 0}});
  GroupRole z = group_role(p, replicas, 0);
  CHECK(z.types == std::vector<uint32_t>{0, 1});
  CHECK(z.replicas[0] == Counts{{1, 0}, {0, 1}});
}

TEST_CASE("every sequence of the global batch is taken once over the types and the group's ranks") {
  for (int batch : {8, 13, 16}) {
    CAPTURE(batch);
    plan::Plan p = four_in_two();
    p.groups = {3, 1};
    p.nodes = 4;
    std::vector<int> taken(size_t(batch), 0);
    for (uint32_t t = 0; t < 2; ++t)
      for (int rank = 0; rank < 3; ++rank) {
        GroupRole r = group_role(p, {}, rank);
        auto [first, count] = rank_sequences(batch, r, t);
        for (int i = first; i < first + count; ++i) ++taken[size_t(i)];
      }
    for (int n : taken) CHECK(n == 1);
  }
}

// Four groups of 2, 1, 3 and 2 ranks over 8 positions (the replica table is not needed here).
plan::Plan four_groups() {
  plan::Plan p;
  p.nodes = 8, p.slots = 1, p.experts = 1;
  p.layers.push_back({{8}, std::vector<std::vector<uint32_t>>(8, {0})});
  p.groups = {2, 1, 3, 2};
  p.stacks.assignment = {{0}, {1}, {2}, {3}};
  return p;
}

TEST_CASE("whole types give unequal work a rank: groups of unequal sizes, or unequal counts of types") {
  plan::Plan p = four_groups();  // groups of 2, 1, 3 and 2 ranks, one type each
  CHECK(uneven_types(p));
  CHECK(group_role(p, {}, 2).even);
  p.groups = {2, 2, 2, 2};
  CHECK(!uneven_types(p));
  CHECK(!group_role(p, {}, 0).even);
  p.stacks.assignment = {{0, 1}, {}, {2}, {3}};  // a group computing two types beside one computing none
  CHECK(uneven_types(p));
  p.groups = {4, 0, 2, 2};  // ... unless it has the ranks for them (an empty group computes nothing)
  CHECK(!uneven_types(p));
  p.groups = {3, 0, 3, 2};
  p.stacks.assignment = {{0, 1}, {}, {2, 3}, {}};  // 2 of 3, 2 of 3, and a group of two computing nothing
  CHECK(uneven_types(p));
  p.groups.clear();  // one group: the one type
  p.stacks.assignment.clear();
  CHECK(!uneven_types(p));
  // groups of 2, 1, 2, 2 (a regroup of 7): the whole batch once over the groups, by their ranks
  plan::Plan q = four_groups();
  q.groups = {2, 1, 2, 2};
  q.nodes = 7;
  for (int batch : {7, 32, 64}) {
    CAPTURE(batch);
    std::vector<int> taken(size_t(batch), 0);
    for (int pos = 0; pos < 7; ++pos) {
      GroupRole r = group_role(q, {}, pos);
      auto [at, n] = rank_part(even_part(batch, r, {}), r);
      CHECK(std::abs(n - batch / 7.0) < 1);
      for (int i = at; i < at + n; ++i) ++taken[size_t(i)];
    }
    for (int n : taken) CHECK(n == 1);
  }
}

TEST_CASE("a spread type: its sequences once over the groups up, every rank that computes one or more") {
  const plan::Plan p = four_groups();
  const std::vector<uint32_t> damaged{1};
  // batch 64: type 1 has 16 sequences; the groups up (0, 2, 3: 2, 3 and 2 ranks) take a part each.
  // batch 16: 4 sequences; with the widest group's 3 ranks one sequence each only one part fits.
  for (auto [batch, parts] : {std::pair{64, 3}, std::pair{16, 1}, std::pair{4, 1}}) {
    CAPTURE(batch);
    auto [first, count] = type_sequences(batch, 4, 1);
    std::vector<int> taken(size_t(batch), 0);
    int groups_with_a_part = 0;
    for (uint32_t g : {0u, 2u, 3u}) {
      const plan::GroupSpan span = plan::group_span(p, g);
      auto part = spread_part(batch, group_role(p, {}, int(span.first)), 1, damaged);
      groups_with_a_part += part.second > 0;
      for (uint32_t pos = span.first; pos < span.first + span.count; ++pos) {
        GroupRole r = group_role(p, {}, int(pos));
        CHECK(spread_part(batch, r, 1, damaged) == part);  // every rank of a group sees the same part
        auto [at, n] = rank_part(part, r);
        CHECK((part.second == 0 || n >= 1 || count < int(span.count)));
        for (int i = at; i < at + n; ++i) ++taken[size_t(i)];
      }
    }
    CHECK(groups_with_a_part == parts);
    for (int i = 0; i < batch; ++i) CHECK(taken[size_t(i)] == (i >= first && i < first + count ? 1 : 0));
    // a damaged group has no part
    const plan::GroupSpan lost = plan::group_span(p, 1);
    CHECK(spread_part(batch, group_role(p, {}, int(lost.first)), 1, damaged).second == 0);
  }
}

TEST_CASE("a degraded step's even parts: the whole batch once over the groups up, by their ranks, one contiguous part each") {
  const plan::Plan p = four_groups();  // groups of 2, 1, 3 and 2 ranks
  const std::vector<uint32_t> damaged{1};
  for (int batch : {7, 14, 64}) {  // 7 ranks up (2 + 3 + 2)
    CAPTURE(batch);
    std::vector<int> taken(size_t(batch), 0);
    for (uint32_t g : {0u, 2u, 3u}) {
      const plan::GroupSpan span = plan::group_span(p, g);
      auto part = even_part(batch, group_role(p, {}, int(span.first)), damaged);
      CHECK(std::abs(part.second - batch * double(span.count) / 7) < span.count);  // in proportion to its ranks
      for (uint32_t pos = span.first; pos < span.first + span.count; ++pos) {
        auto [at, n] = rank_part(part, group_role(p, {}, int(pos)));
        CHECK(n >= 1);
        for (int i = at; i < at + n; ++i) ++taken[size_t(i)];
      }
    }
    for (int n : taken) CHECK(n == 1);
    CHECK(even_part(batch, group_role(p, {}, int(plan::group_span(p, 1).first)), damaged).second == 0);
  }
  // fewer sequences than ranks up: no even parts (the groups compute their types and spread parts)
  CHECK(even_part(6, group_role(p, {}, 0), damaged).second == 0);
}

TEST_CASE("the validation set over the groups up: every sequence once, even where there are fewer than the ranks up") {
  const plan::Plan p = four_groups();  // groups of 2, 1, 3 and 2 ranks
  const std::vector<uint32_t> damaged{1};
  for (int total : {0, 3, 7, 50}) {  // 7 ranks up (2 + 3 + 2)
    CAPTURE(total);
    std::vector<int> taken(size_t(total), 0);
    for (uint32_t g : {0u, 2u, 3u}) {
      const plan::GroupSpan span = plan::group_span(p, g);
      auto part = groups_up_part(total, group_role(p, {}, int(span.first)), damaged);
      if (total >= 7) CHECK(std::abs(part.second - total * double(span.count) / 7) < span.count);
      for (uint32_t pos = span.first; pos < span.first + span.count; ++pos) {
        auto [at, n] = rank_part(part, group_role(p, {}, int(pos)));
        CHECK(n >= 0);
        for (int i = at; i < at + n; ++i) ++taken[size_t(i)];
      }
    }
    for (int n : taken) CHECK(n == 1);
    CHECK(groups_up_part(total, group_role(p, {}, int(plan::group_span(p, 1).first)), damaged).second == 0);
  }
}

TEST_CASE("a damaged group rejoining the degraded steps: its ranks left a group of their own, the batch still taken once") {
  const plan::Plan p = four_groups();  // groups of 2, 1, 3 and 2 ranks: positions 0-1, 2, 3-5, 6-7
  // every position holds the one expert: any ranks left of a group hold a whole model
  std::vector<Counts> replicas = {{std::vector<uint32_t>(8, 1)}};
  // positions 4 (group 2) and 6 (group 3) lost: group 2 rejoins with 3 and 5, group 3 stays out
  const std::vector<uint32_t> left{0, 1, 2, 3, 5, 7}, rejoin{2}, out{3};
  for (int batch : {5, 16, 64}) {
    CAPTURE(batch);
    std::vector<int> taken(size_t(batch), 0);
    for (uint32_t pos : left) {
      GroupRole r = rejoined_role(group_role(p, replicas, int(pos)), replicas, rejoin, left, int(pos));
      CHECK(r.sizes == std::vector<uint32_t>{2, 1, 2, 2});
      auto [at, n] = rank_part(even_part(batch, r, out), r);
      if (pos == 7) CHECK(n == 0);  // its group stays out
      for (int i = at; i < at + n; ++i) ++taken[size_t(i)];
    }
    for (int n : taken) CHECK(n == 1);
  }
  GroupRole five = rejoined_role(group_role(p, replicas, 5), replicas, rejoin, left, 5);
  CHECK(five.span.group == 2);
  CHECK(five.span.count == 2);
  CHECK(five.local_rank == 1);                        // 3 and 5 left: 5 is the second
  CHECK(five.replicas[0] == Counts{{1, 1}});          // its group's table: the two of them
  GroupRole zero = rejoined_role(group_role(p, replicas, 0), replicas, rejoin, left, 0);
  CHECK(zero.span.count == 2);                        // a group not rejoining keeps its span
  CHECK(zero.local_rank == 0);
}
