// test_remap.cpp — greedy node remapping keeps replicas in place; transfers spread over owners.
#include <doctest/doctest.h>

#include <map>

#include "plan/remap.h"
#include "plan/layer_plan.h"

using namespace sal;
using namespace sal::plan;
using sal::plan::test::one_layer;

TEST_CASE("a permuted plan is remapped onto the nodes that already hold it: nothing moves") {
  Holdings held = {{{0, 1}}, {{2, 3}}, {{4, 5}}};
  Plan p = one_layer({{4, 5}, {0, 1}, {2, 3}}, 6);
  auto r = greedy_remap(held, {true, true, true}, p);
  REQUIRE(r.ok());
  CHECK(r->node_of_position == std::vector<int32_t>{2, 0, 1});
  CHECK(r->kept == 6);
  CHECK(r->fetched == 0);
  auto t = transfer_schedule(held, {true, true, true}, p, *r);
  REQUIRE(t.ok());
  CHECK(t->empty());
}

TEST_CASE("the ordered remap keeps nodes in their order and counts what stays and what moves, and is none when it cannot") {
  Holdings held = {{{0, 1}}, {{2, 3}}, {{4, 5}}, {{}}};
  Plan p = one_layer({{0, 1}, {2, 3}, {4, 1}}, 6);
  auto r = ordered_remap(held, {true, true, true, true}, p, {0, 1, 2});
  REQUIRE(r);
  CHECK(r->node_of_position == std::vector<int32_t>{0, 1, 2});
  CHECK(r->position_of_node == std::vector<int32_t>{0, 1, 2, -1});
  CHECK(r->kept == 5);
  CHECK(r->fetched == 1);  // expert 1 on node 2
  auto swapped = ordered_remap(held, {true, true, true, true}, p, {1, 0, 2});
  REQUIRE(swapped);
  CHECK(swapped->kept == 1);
  CHECK_FALSE(ordered_remap(held, {true, true, false, true}, p, {0, 1, 2}));  // a dead node
  CHECK_FALSE(ordered_remap(held, {true, true, true, true}, p, {0, 1}));      // too few
  CHECK_FALSE(ordered_remap(held, {true, true, true, true}, p, {0, 1, 1}));   // twice
}

TEST_CASE("after a node is lost its replicas are fetched from surviving owners, spread evenly") {
  // Expert 0 lives on nodes 0, 1, 2; node 3 (dead) held 0 and 1 — four positions need expert 0.
  Holdings held = {{{0, 1}}, {{0, 2}}, {{0, 3}}, {{0, 1}}, {{}}};
  std::vector<bool> alive = {true, true, true, false, true};
  Plan p = one_layer({{0, 1}, {0, 2}, {0, 3}, {0, 1}}, 4);
  auto r = greedy_remap(held, alive, p);
  REQUIRE(r.ok());
  CHECK(r->position_of_node[3] == -1);  // the dead node gets no position
  CHECK(r->node_of_position[3] == 4);   // the spare node takes the dead node's part
  auto t = transfer_schedule(held, alive, p, *r);
  REQUIRE(t.ok());
  std::map<uint32_t, int> sends;
  for (auto& x : *t) {
    CHECK(x.to_node == 4);  // only the newcomer receives; everyone else keeps what it has
    CHECK(x.from_node != 3);
    ++sends[x.from_node];
  }
  CHECK(t->size() == 2);  // experts 0 and 1
  for (auto& [from, n] : sends) CHECK(n == 1);
}

TEST_CASE("an expert with no surviving owner cannot be transferred") {
  Holdings held = {{{0, 1}}, {{2, 3}}};
  Plan p = one_layer({{0, 1}, {2, 3}}, 4);
  Holdings with_spare = {held[0], held[1], {{}}};
  std::vector<bool> alive = {true, false, true};
  auto r = greedy_remap(with_spare, alive, p);
  REQUIRE(r.ok());
  auto t = transfer_schedule(with_spare, alive, p, *r);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message() == "layer 0 expert 2 has no surviving replica: restore it from a checkpoint");
}

TEST_CASE("more positions than nodes is refused") {
  Holdings held = {{{0}}};
  CHECK_FALSE(greedy_remap(held, {true}, one_layer({{0}, {0}}, 1)).ok());
  Holdings two = {{{0}}, {{0}}};
  CHECK(greedy_remap(two, {true, false}, one_layer({{0}, {0}}, 1)).error().message() ==
        "the plan has 2 positions but only 1 nodes are alive");
}

TEST_CASE("replicas_fetched: what a re-plan on the same workers moves, its positions remapped first") {
  const LayerSlots now = {{{0, 1}, {2, 3}, {0, 2}}};
  auto total = [&](const LayerSlots& next) { return replicas_fetched(now, next)->total; };
  CHECK(total({{{0, 2}, {0, 1}, {2, 3}}}) == 0);  // the same nodes in another order
  CHECK(total({{{0, 1}, {2, 3}, {0, 3}}}) == 1);  // one slot changed
  CHECK(total({{{1, 3}, {1, 3}, {1, 3}}}) == 4);  // each node keeps one
  CHECK(total({{{0, 1}, {2, 3}, {1, 1}}}) == 1);  // one fetch fills both slots
  // the most one worker fetches: the first two keep one of {1, 3} each, the third fetches both
  CHECK(replicas_fetched(now, {{{1, 3}, {1, 3}, {1, 3}}})->most == 2);
  CHECK(replicas_fetched(now, {{{0, 1}, {2, 3}, {0, 3}}})->most == 1);
  CHECK(replicas_fetched(now, {{{0, 2}, {0, 1}, {2, 3}}})->most == 0);
  auto r = replicas_fetched(now, {{{0, 1}, {2, 3}}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == "layer 1 of the placement held has 3 nodes, the new one 2");
  CHECK_FALSE(replicas_fetched(now, {}).ok());
  auto far = replicas_fetched(now, {{{0, 1}, {2, 3}, {0, 4000000000u}}});  // nothing is sized by it
  REQUIRE_FALSE(far.ok());
  CHECK(far.error().message() == "layer 1 names expert 4000000001 in its 6 slots");
}

namespace {

// The greedy remap as remap.h states it, written directly: every (position, node) pair's overlap
// (replicas of the position the node holds, all layers), the pairs taken largest overlap first, then
// by position, then node, where both are free and the node's failure domain is the position's; the
// positions left, in order, the lowest free node of their domain.
std::vector<int32_t> reference_remap(const Holdings& held, const std::vector<bool>& alive, const Plan& plan,
                                     const std::vector<uint32_t>& domain_of_node) {
  struct Pair {
    uint32_t score, position, node;
  };
  std::vector<Pair> pairs;
  for (uint32_t p = 0; p < plan.nodes; ++p)
    for (uint32_t n = 0; n < held.size(); ++n) {
      if (!alive[n]) continue;
      uint32_t score = 0;
      for (size_t l = 0; l < plan.layers.size(); ++l) {
        std::map<ExpertId, int> have;
        for (ExpertId e : held[n][l]) ++have[e];
        for (ExpertId e : plan.layers[l].placement[p])
          if (have[e]-- > 0) ++score;
      }
      if (score > 0) pairs.push_back({score, p, n});
    }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.position != b.position ? a.position < b.position : a.node < b.node;
  });
  auto fits = [&](uint32_t p, uint32_t n) { return plan.domains.empty() || plan.domains[p] == domain_of_node[n]; };
  std::vector<int32_t> of_position(plan.nodes, -1), of_node(held.size(), -1);
  for (const auto& [score, p, n] : pairs)
    if (of_position[p] < 0 && of_node[n] < 0 && fits(p, n)) of_position[p] = int32_t(n), of_node[n] = int32_t(p);
  for (uint32_t p = 0; p < plan.nodes; ++p)
    for (uint32_t n = 0; n < held.size() && of_position[p] < 0; ++n)
      if (alive[n] && of_node[n] < 0 && fits(p, n)) of_position[p] = int32_t(n), of_node[n] = int32_t(p);
  return of_position;
}

}  // namespace

TEST_CASE("the greedy remap takes the pairs its rule states, on random plans with copies, dead nodes, domains") {
  uint64_t seed = 7;
  auto next = [&](uint64_t below) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % below;
  };
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const uint32_t nodes = 2 + uint32_t(next(14)), slots = 1 + uint32_t(next(4)), layers = 1 + uint32_t(next(3));
    const uint32_t experts = 1 + uint32_t(next(6));  // few experts: many nodes hold the same, as blocks do
    const bool domains = next(3) == 0;
    auto slots_of = [&] {
      std::vector<ExpertId> s(slots);
      for (auto& e : s) e = ExpertId(next(experts));
      return s;
    };
    Holdings held(nodes, std::vector<std::vector<ExpertId>>(layers));
    std::vector<bool> alive(nodes, true);
    std::vector<uint32_t> domain_of_node(nodes);
    for (uint32_t n = 0; n < nodes; ++n) {
      for (auto& l : held[n]) l = next(5) == 0 ? std::vector<ExpertId>{} : slots_of();  // some joined empty
      domain_of_node[n] = domains ? uint32_t(next(2)) : 0;
    }
    const uint32_t dead = uint32_t(next(3));
    for (uint32_t i = 0; i < dead; ++i) alive[next(nodes)] = false;
    const uint32_t live = uint32_t(std::count(alive.begin(), alive.end(), true));
    if (live == 0) continue;
    Plan plan;
    plan.nodes = 1 + uint32_t(next(live)), plan.slots = slots, plan.experts = experts;
    plan.layers.resize(layers);
    for (auto& l : plan.layers)
      for (uint32_t p = 0; p < plan.nodes; ++p) l.placement.push_back(slots_of());
    if (domains) {  // each position in the domain of a distinct live node, so a remap exists
      std::vector<uint32_t> live_nodes;
      for (uint32_t n = 0; n < nodes; ++n)
        if (alive[n]) live_nodes.push_back(n);
      for (uint32_t p = 0; p < plan.nodes; ++p) plan.domains.push_back(domain_of_node[live_nodes[p]]);
    }
    CAPTURE(trial);
    auto r = greedy_remap(held, alive, plan, domain_of_node);
    REQUIRE_MESSAGE(r.ok(), r.error().message());
    CHECK(r->node_of_position == reference_remap(held, alive, plan, domain_of_node));
    uint64_t total = 0;
    for (const auto& l : plan.layers)
      for (const auto& s : l.placement) total += s.size();
    CHECK(r->kept + r->fetched == total);
    ++checked;
  }
  CHECK(checked > 250);
}
