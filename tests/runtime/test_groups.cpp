// test_groups.cpp — a worker's role in a grouped plan: its group, its place there, the shard types
// its group computes, the group's own replica table, and the sequences of each type it takes —
// every sequence of the global batch exactly once over the types and the group's ranks.
#include <doctest/doctest.h>

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
