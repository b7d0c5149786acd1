// test_snapshot_peers.cpp — where a rank's sparse snapshots are held: never on its own node, first
// on nodes that hold none of the experts the rank writes, no two copies on nodes sharing an expert
// (so losing every holder of any one expert leaves a copy), spread over the nodes, all of them when
// there are fewer than asked.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "plan/snapshot_peers.h"
#include "plan/unit_writers.h"

using namespace sal;
using namespace sal::plan;

namespace {

// One layer of 6 experts on 6 ranks (one a node), each expert on two adjacent ranks:
// rank r holds experts r and r - 1 (mod 6).
Plan ring() {
  Plan p;
  p.nodes = 6, p.slots = 2, p.experts = 6;
  LayerPlan l;
  l.replicas.assign(6, 2);
  for (uint32_t r = 0; r < 6; ++r) l.placement.push_back({r, (r + 5) % 6});
  p.layers = {l};
  return p;
}

bool has(const std::vector<uint32_t>& v, uint32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("a rank's slices go to r other nodes, the first holding none of the experts it writes, no two sharing an expert, spread") {
  Plan p = ring();
  std::vector<uint32_t> node_of_rank{10, 11, 12, 13, 14, 15};
  // expert e sits on ranks e and e + 1: the writing spread, each rank writes one (expert 5, on ranks
  // 0 and 5, goes to rank 5, which writes none yet)
  CHECK(experts_written(p, 0) == std::vector<std::pair<int, int>>{{0, 0}});
  CHECK(experts_written(p, 3) == std::vector<std::pair<int, int>>{{0, 3}});
  CHECK(experts_written(p, 5) == std::vector<std::pair<int, int>>{{0, 5}});
  auto peers = snapshot_peers(p, node_of_rank, 2);
  REQUIRE(peers.size() == 6);
  for (uint32_t r = 0; r < 6; ++r) {
    CAPTURE(r);
    CHECK(peers[r].size() == 2);
    CHECK_FALSE(has(peers[r], node_of_rank[r]));
    auto lives_on = [&](uint32_t node) {  // one of the experts the rank writes lives there
      for (const auto& [l, e] : experts_written(p, r))
        for (uint32_t pos = 0; pos < 6; ++pos)
          if (node_of_rank[pos] == node &&
              std::count(p.layers[0].placement[pos].begin(), p.layers[0].placement[pos].end(), uint32_t(e)))
            return true;
      return false;
    };
    CHECK_FALSE(lives_on(peers[r][0]));  // losing every holder of its experts leaves this copy
    // and losing every holder of any one expert leaves a copy: the two nodes share no expert
    for (uint32_t e = 0; e < 6; ++e) {
      int holding = 0;
      for (uint32_t node : peers[r])
        for (uint32_t pos = 0; pos < 6; ++pos)
          holding += node_of_rank[pos] == node && has(p.layers[0].placement[pos], e);
      CHECK_MESSAGE(holding < 2, "expert " << e);
    }
  }
  // spread: 12 copies over 6 nodes, none holding more than 3
  std::map<uint32_t, int> load;
  for (const auto& ps : peers)
    for (uint32_t n : ps) ++load[n];
  for (const auto& [n, k] : load) CHECK(k <= 3);
}

TEST_CASE("two workers on one node share its peers' choice, and a small mesh gives every other node") {
  Plan p = ring();
  // ranks 0 and 1 on node 7, the rest one a node
  auto peers = snapshot_peers(p, {7, 7, 8, 9, 10, 11}, 2);
  CHECK_FALSE(has(peers[0], 7));
  CHECK_FALSE(has(peers[1], 7));
  Plan two;
  two.nodes = 2, two.slots = 1, two.experts = 2;
  two.layers = {LayerPlan{{1, 1}, {{0}, {1}}}};
  auto small = snapshot_peers(two, {1, 2}, 3);
  CHECK(small[0] == std::vector<uint32_t>{2});  // fewer other nodes than asked: all of them
  CHECK(small[1] == std::vector<uint32_t>{1});
}

TEST_CASE("with racks named, a rank's slices span the racks, the first copy away from the writer's rack") {
  Plan p = ring();
  std::vector<uint32_t> node_of_rank{10, 11, 12, 13, 14, 15};
  std::map<uint32_t, std::string> rack_of{{10, "a"}, {11, "a"}, {12, "a"}, {13, "b"}, {14, "b"}, {15, "b"}};
  auto peers = snapshot_peers(p, node_of_rank, 2, rack_of);
  REQUIRE(peers.size() == 6);
  for (uint32_t rank = 0; rank < 6; ++rank) {
    CAPTURE(rank);
    REQUIRE(peers[rank].size() == 2);
    // either rack lost, a copy is left; and the writer's rack lost, one is left outside it
    CHECK(rack_of[peers[rank][0]] != rack_of[node_of_rank[rank]]);
    CHECK(rack_of[peers[rank][0]] != rack_of[peers[rank][1]]);
  }
  // without racks the rule is the nodes' alone: rank 3's copies both in rack b (nodes 14 and 15)
  auto plain = snapshot_peers(p, node_of_rank, 2);
  bool one_rack = false;
  for (uint32_t rank = 0; rank < 6; ++rank) one_rack = one_rack || rack_of[plain[rank][0]] == rack_of[plain[rank][1]];
  CHECK(one_rack);
}

TEST_CASE("a regrouped plan with nodes of mixed holdings: the copies of every rank survive the loss of any one expert's holders, spread") {
  // the groups of a grouped job after one of its workers was lost (seven workers, 8 experts on 4
  // slots in both layers): groups {0, 1}, {5, 7} split the experts in halves, group {2, 4, 6} mixes them
  Plan p;
  p.nodes = 7, p.slots = 4, p.experts = 8;
  const std::vector<std::vector<ExpertId>> held{{0, 1, 2, 3}, {4, 5, 6, 7}, {4, 2, 3, 6}, {1, 0, 7, 5},
                                                {4, 5, 6, 7}, {0, 1, 2, 3}, {4, 5, 6, 7}};
  for (int l = 0; l < 2; ++l) p.layers.push_back(LayerPlan{std::vector<uint32_t>(8, 0), held});
  for (auto& layer : p.layers)
    for (const auto& h : held)
      for (ExpertId e : h) ++layer.replicas[e];
  std::vector<uint32_t> node_of_rank{0, 1, 2, 4, 5, 6, 7};
  auto peers = snapshot_peers(p, node_of_rank, 2);
  std::map<uint32_t, int> load;
  for (uint32_t r = 0; r < 7; ++r) {
    CAPTURE(r);
    REQUIRE(peers[r].size() == 2);
    for (uint32_t n : peers[r]) ++load[n];
    for (ExpertId e = 0; e < 8; ++e) {  // every holder of expert e lost: one of the two copies is elsewhere
      int holding = 0;
      for (uint32_t n : peers[r])
        for (uint32_t pos = 0; pos < 7; ++pos) holding += node_of_rank[pos] == n && has(held[pos], e);
      CHECK_MESSAGE(holding < 2, "expert " << e);
    }
  }
  // 14 copies over 7 nodes: none holds more than 2 past an even share
  for (const auto& [n, k] : load) CHECK_MESSAGE(k <= 4, "node " << n);
}

TEST_CASE("after a patch lost a rank, the survivors' copies go to nodes still up, still surviving the loss of any one expert's holders") {
  // eight workers in four groups of two, 8 experts on 4 slots: even ranks hold experts 0-3, odd
  // ones 4-7; rank 3 (node 3) is lost and the steps run degraded under the same plan
  Plan p;
  p.nodes = 8, p.slots = 4, p.experts = 8;
  std::vector<std::vector<ExpertId>> held;
  for (uint32_t r = 0; r < 8; ++r) held.push_back(r % 2 ? std::vector<ExpertId>{4, 5, 6, 7} : std::vector<ExpertId>{0, 1, 2, 3});
  p.layers.push_back(LayerPlan{std::vector<uint32_t>(8, 4), held});
  std::vector<uint32_t> node_of_rank{0, 1, 2, 3, 4, 5, 6, 7};
  const auto before = snapshot_peers(p, node_of_rank, 2);
  bool some_on_3 = false;
  for (const auto& nodes : before) some_on_3 = some_on_3 || has(nodes, 3);
  REQUIRE(some_on_3);  // the plan's own peers use node 3: they are what a patch must replace
  const auto peers = snapshot_peers(p, node_of_rank, 2, {}, {3});
  REQUIRE(peers.size() == 8);
  CHECK(peers[3].empty());  // the lost rank writes nothing
  for (uint32_t r = 0; r < 8; ++r) {
    if (r == 3) continue;
    CAPTURE(r);
    REQUIRE(peers[r].size() == 2);
    CHECK_FALSE(has(peers[r], 3));
    CHECK_FALSE(has(peers[r], r));
    // every live holder of expert 0 lost (the even nodes), or of expert 4 (the odd ones up): a copy is left
    for (uint32_t parity : {0u, 1u})
      CHECK(std::any_of(peers[r].begin(), peers[r].end(), [&](uint32_t n) { return n % 2 != parity; }));
  }
  // the lost rank's experts are written by the other holders (unit_writers with it absent)
  for (const auto& [l, e] : experts_written(p, 3)) {
    bool taken = false;
    for (uint32_t r : {1u, 5u, 7u})
      for (const auto& ex : experts_written(p, r, {3})) taken = taken || ex == std::pair(l, e);
    CHECK_MESSAGE(taken, "expert " << e);
  }
}
