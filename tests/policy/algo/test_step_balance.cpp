// test_step_balance.cpp — judging a placement on the steps' own routing (algo/step_balance.h) and
// the constructions that pass a step's excess on ("chain", "mixed"): a step whose tokens crowd onto
// a few experts leaves closed blocks of nodes uneven where a ring or a mixed layout evens it; the
// frontier judged on steps ranks them so and keeps the mean loads' figure beside; the two layouts'
// holder sets are what they claim (a ring; pairs all distinct, the same in every layer).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "policy/algo/frontier.h"
#include "policy/algo/placement_layouts.h"
#include "policy/algo/rng.h"
#include "policy/algo/step_balance.h"
#include "layers.h"

using namespace sal::algo;
using namespace sal::algo::test;

namespace {

constexpr int kNodes = 8, kSlots = 4, kExperts = 16;

// Steps of 16 experts: 100 tokens each, and two experts (a different pair each step) 400 more —
// the window's mean is nearly even, each step is not.
std::vector<std::vector<uint32_t>> crowded_steps(Rng& rng, int count) {
  std::vector<std::vector<uint32_t>> steps;
  for (int s = 0; s < count; ++s) {
    std::vector<uint32_t> t(kExperts, 100);
    const auto a = size_t(rng.below(kExperts));
    auto b = size_t(rng.below(kExperts - 1));
    b += b >= a;
    t[a] += 400, t[b] += 400;
    steps.push_back(t);
  }
  return steps;
}

std::vector<double> mean_of(const std::vector<std::vector<uint32_t>>& steps) {
  std::vector<double> m(kExperts, 0);
  for (const auto& s : steps)
    for (size_t e = 0; e < s.size(); ++e) m[e] += double(s[e]) / double(steps.size());
  return m;
}

// The node pairs holding some expert of a two-replica layer.
std::set<std::pair<int, int>> holder_pairs(const LayerPlacement& l) {
  std::set<std::pair<int, int>> out;
  for (int e = 0; e < l.experts; ++e) {
    std::vector<int> at;
    for (int n = 0; n < int(l.nodes.size()); ++n)
      if (std::find(l.nodes[size_t(n)].begin(), l.nodes[size_t(n)].end(), e) != l.nodes[size_t(n)].end()) at.push_back(n);
    REQUIRE(at.size() == 2);
    out.insert({at[0], at[1]});
  }
  return out;
}

const FrontierPoint& point(const Frontier& f, const std::string& name) {
  auto it = std::find_if(f.points.begin(), f.points.end(), [&](const FrontierPoint& p) { return p.name == name; });
  REQUIRE(it != f.points.end());
  return *it;
}

}  // namespace

TEST_CASE("step balance: the dispatcher's split of each step, closed blocks against a ring") {
  // two blocks of two nodes, each block holding its experts on both nodes (mro's shape at 4 x 2)
  LayerPlacement blocks{4, {{0, 1}, {0, 1}, {2, 3}, {2, 3}}};
  // the same slots as a ring: expert e on nodes e and e + 1
  LayerPlacement ring{4, {{0, 3}, {1, 0}, {2, 1}, {3, 2}}};
  // one step: experts 0 and 1 take 300 tokens each, 2 and 3 none: blocks leave it on nodes 0-1
  // (300 each against a mean of 150); on the ring they reach nodes 0, 1 and 2 (200 each at best)
  const std::vector<std::vector<uint32_t>> step{{300, 300, 0, 0}};
  CHECK(step_imbalance(blocks, step, true) == doctest::Approx(2.0));
  CHECK(step_imbalance(ring, step, true) == doctest::Approx(4.0 / 3).epsilon(0.01));
  // split evenly the ring cannot use that: node 1 takes half of each
  CHECK(step_imbalance(ring, step, false) == doctest::Approx(2.0));
  // no steps, or no tokens: even
  CHECK(step_imbalance(ring, {}, true) == 1.0);
  CHECK(step_imbalance(ring, {{0, 0, 0, 0}}, true) == 1.0);
}

TEST_CASE("chain and mixed: valid layouts, a chain's holders form a ring, mixed's pairs are all distinct") {
  LayerDemand d{std::vector<int>(kExperts, 2), std::vector<double>(kExperts, 1)};
  auto chain = chain_layout(d, kNodes, kSlots, 2);
  REQUIRE(chain.ok());
  auto mixed = mixed_layout(d, kNodes, kSlots, 2);
  REQUIRE(mixed.ok());
  for (const auto* l : {&*chain, &*mixed}) {
    for (const auto& node : l->nodes) CHECK(node.size() == size_t(kSlots));
    CHECK(replica_counts(*l) == d.replicas);
    CHECK(spans_floor(*l, d.replicas, 2));
  }
  // the chain: every node paired with its two neighbours only, two experts a pair
  const auto ring = holder_pairs(*chain);
  CHECK(ring.size() == size_t(kNodes));
  for (int n = 0; n < kNodes; ++n) CHECK(ring.count({std::min(n, (n + 1) % kNodes), std::max(n, (n + 1) % kNodes)}) == 1);
  // mixed: 16 experts on 16 different pairs
  CHECK(holder_pairs(*mixed).size() == size_t(kExperts));
  // the loads do not change mixed's holder sets (layers line up)
  LayerDemand skewed = d;
  for (int e = 0; e < kExperts; ++e) skewed.loads[size_t(e)] = 1 + e * e;
  auto again = mixed_layout(skewed, kNodes, kSlots, 2);
  REQUIRE(again.ok());
  CHECK(holder_pairs(*again) == holder_pairs(*mixed));
  // with several replica counts, still valid and on the floor
  Rng rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    const int nodes = 3 + int(rng.below(14)), slots = 2 + int(rng.below(6)), experts = 2 + int(rng.below(uint64_t(nodes * slots / 2)));
    LayerDemand r{std::vector<int>(size_t(experts), 1), std::vector<double>(size_t(experts), 1)};
    for (int i = experts; i < nodes * slots; ++i) ++r.replicas[size_t(rng.below(uint64_t(experts)))];
    for (auto& t : r.loads) t = 1 + double(rng.below(100));
    for (auto made : {chain_layout(r, nodes, slots, 2), mixed_layout(r, nodes, slots, 2)}) {
      REQUIRE(made.ok());
      CHECK(replica_counts(*made) == r.replicas);
      for (const auto& node : made->nodes) CHECK(node.size() == size_t(slots));
    }
  }
}

TEST_CASE("the frontier judged on steps: blocks look even on the mean and are not, a ring and mixed are") {
  Rng rng(7);
  std::vector<LayerDemand> layers;
  FrontierOptions o;
  o.nodes = kNodes, o.slots = kSlots, o.floor = 2;
  for (int l = 0; l < 2; ++l) {
    const auto steps = crowded_steps(rng, 24);
    layers.push_back({std::vector<int>(kExperts, 2), mean_of(steps)});
    o.steps.push_back(steps);
  }
  auto on_loads = placement_frontier(layers, FrontierOptions{kNodes, kSlots, 2});
  auto on_steps = placement_frontier(layers, o);
  REQUIRE(on_loads.ok());
  REQUIRE(on_steps.ok());
  // on the mean loads every block layout is within 2 % of even, and so judged
  const auto& blocks_loads = point(*on_loads, "blocks-4");
  CHECK(blocks_loads.mean_balance < 1.02);
  CHECK(blocks_loads.mean_balance == blocks_loads.mean_load_balance);
  // on the steps, blocks of nodes leave each step's two hot experts where they are
  const auto& blocks = point(*on_steps, "blocks-4");
  const auto& chain = point(*on_steps, "chain");
  const auto& mixed = point(*on_steps, "mixed");
  MESSAGE("step balance: blocks-4 ", blocks.mean_balance, ", chain ", chain.mean_balance, ", mixed ", mixed.mean_balance);
  CHECK(blocks.mean_balance > 1.3);
  CHECK(blocks.mean_load_balance == doctest::Approx(blocks_loads.mean_load_balance));
  CHECK(chain.mean_balance < blocks.mean_balance - 0.2);
  CHECK(mixed.mean_balance <= chain.mean_balance + 1e-9);
  CHECK(chain.on_frontier);
  // survival is what they pay: mixed below the chain below the blocks at two failures
  CHECK(mixed.p[1] < chain.p[1]);
  CHECK(chain.p[1] < blocks.p[1]);
  // the points are ordered by the balance judged
  for (size_t i = 1; i < on_steps->points.size(); ++i)
    CHECK(on_steps->points[i - 1].mean_balance <= on_steps->points[i].mean_balance + 1e-9);
  // steps for another number of layers: refused
  o.steps.pop_back();
  auto wrong = placement_frontier(layers, o);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message().find("steps are given for 1 layers, the replicas for 2") != std::string::npos);
  // and the constructions can be asked for by name
  FrontierOptions only{kNodes, kSlots, 2};
  only.only = std::vector<std::string>{"chain", "mixed"};
  auto two = placement_frontier(layers, only);
  REQUIRE(two.ok());
  CHECK(two->points.size() == 2);
}
