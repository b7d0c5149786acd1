// test_frontier.cpp — the placement constructions (blocks of g, balance first) and the frontier of
// balance against recovery: every point a valid placement of the given replicas, no frontier point
// beaten, mro's structure at one end with its closed-form recovery, a genuine trade on skewed loads,
// the balance bound, and errors naming what is wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "policy/algo/frontier.h"
#include "policy/algo/placement_balance.h"
#include "policy/algo/placement_layouts.h"
#include "policy/algo/rng.h"
#include "layers.h"

using namespace sal::algo;
using namespace sal::algo::test;

namespace {

// Replicas in proportion to load with a floor, filling `total` slots: each expert's ideal share
// rounded down (at least the floor), then one more at a time to the most loaded per replica.
std::vector<int> proportional(const std::vector<double>& loads, int total, int floor) {
  double sum = 0;
  for (double t : loads) sum += t;
  std::vector<int> r;
  int given = 0;
  for (double t : loads) r.push_back(std::max(floor, int(t / sum * (total - floor * int(loads.size()))))), given += r.back();
  for (; given < total; ++given) {
    size_t best = 0;
    for (size_t e = 1; e < r.size(); ++e)
      if (loads[e] / r[e] > loads[best] / r[best]) best = e;
    ++r[best];
  }
  return r;
}

// A skewed layer like the SmartMoE counts: a few hot experts, a long cold tail.
std::vector<double> skewed_loads(Rng& rng, int experts) {
  std::vector<double> t(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) t[size_t(e)] = 8000.0 / std::pow(e + 1, 1.6) * (0.5 + double(rng.below(1000)) / 1000);
  for (size_t i = t.size(); i > 1; --i) std::swap(t[i - 1], t[size_t(rng.below(i))]);
  return t;
}

void check_valid(const LayerPlacement& l, const LayerDemand& d, int nodes, int slots, int floor) {
  REQUIRE(int(l.nodes.size()) == nodes);
  for (const auto& node : l.nodes) CHECK(int(node.size()) == slots);
  auto counts = replica_counts(LayerPlacement{int(d.replicas.size()), l.nodes});
  CHECK(counts == d.replicas);
  CHECK(spans_floor(l, d.replicas, floor));
}

}  // namespace

TEST_CASE("blocks of g: valid layouts, the cold experts g to a pair of nodes") {
  Rng rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int nodes = 4 + int(rng.below(20)), slots = 2 + int(rng.below(7));
    const int experts = std::max(2, int(rng.below(uint64_t(nodes * slots / 2))) + 1);
    LayerDemand d{proportional(skewed_loads(rng, experts), nodes * slots, 2), {}};
    d.loads = skewed_loads(rng, experts);
    for (int g = 0; g <= slots; ++g) {
      auto l = blocks_layout(d, nodes, slots, g, 2);
      REQUIRE(l.ok());
      check_valid(*l, d, nodes, slots, 2);
    }
  }
  // 16 nodes x 8 slots, 24 experts at the floor of 2 and 8 hot ones: blocks of 8 are mro's three
  // node pairs; blocks of 3 are eight pairs covering every node; the pairs are the only minimal sets.
  std::vector<int> r(24, 2);
  for (int e = 0; e < 8; ++e) r.push_back(10);
  LayerDemand d{r, std::vector<double>(32, 1.0)};
  for (int e = 24; e < 32; ++e) d.loads[size_t(e)] = 50;
  const double pairs = 16.0 * 15 / 2;
  for (auto [g, minimal_pairs] : {std::pair{8, 3}, std::pair{4, 6}, std::pair{3, 8}}) {
    auto l = blocks_layout(d, 16, 8, g, 2);
    REQUIRE(l.ok());
    auto p2 = recovery_probability(*l, 2);
    REQUIRE(p2.ok());
    CHECK(p2->p == doctest::Approx(1 - minimal_pairs / pairs).epsilon(1e-12));
  }
}

TEST_CASE("the frontier: valid points, none on it beaten, mro's end and a balanced end") {
  Rng rng(11);
  const int nodes = 16, slots = 8, experts = 32;
  std::vector<LayerDemand> layers;
  for (int l = 0; l < 4; ++l) {
    LayerDemand d;
    d.loads = skewed_loads(rng, experts);
    d.replicas = proportional(d.loads, nodes * slots, 2);
    layers.push_back(d);
  }
  FrontierOptions o;
  o.nodes = nodes, o.slots = slots, o.floor = 2;
  auto f = placement_frontier(layers, o);
  REQUIRE(f.ok());
  REQUIRE(f->points.size() >= 3);
  int on = 0;
  for (const auto& p : f->points) {
    for (size_t l = 0; l < layers.size(); ++l) check_valid(p.layers[l], layers[l], nodes, slots, 2);
    CHECK(p.p.size() == 3);
    CHECK(p.p[0] == 1.0);  // the floor of 2: no single failure loses an expert
    on += p.on_frontier;
    if (!p.on_frontier) {
      auto by = std::find_if(f->points.begin(), f->points.end(), [&](const FrontierPoint& q) { return q.name == p.beaten_by; });
      REQUIRE(by != f->points.end());
      CHECK(!beats(p, *by));
    }
    for (const auto& q : f->points)
      if (p.on_frontier && q.on_frontier) CHECK_FALSE(beats(q, p));
  }
  CHECK(on >= 2);  // a real trade: more balance costs some survival of two or three failures
  for (size_t i = 1; i < f->points.size(); ++i) CHECK(f->points[i - 1].mean_balance <= f->points[i].mean_balance + 1e-9);
  // The most balanced point on the frontier is within 15 % of even here; the bound is below it.
  auto best = std::find_if(f->points.begin(), f->points.end(), [](const FrontierPoint& p) { return p.on_frontier; });
  CHECK(best->mean_balance < 1.15);
  for (size_t l = 0; l < layers.size(); ++l) CHECK(f->bound[l] <= best->balance[l] + 1e-9);
  // blocks-8 has mro's structure: its P(2) is the closed form of disjoint pairs, the highest here.
  auto mro = std::find_if(f->points.begin(), f->points.end(), [](const FrontierPoint& p) { return p.name == "blocks-8"; });
  REQUIRE(mro != f->points.end());
  for (const auto& p : f->points) CHECK(p.p[1] <= mro->p[1] + 1e-12);
}

TEST_CASE("a caller's candidate is weighed as it is, and equal figures keep the first") {
  const int nodes = 4, slots = 2;
  LayerDemand d{{2, 2, 2, 2}, {1, 1, 1, 1}};
  // mro's layout for these replicas: {1,2} on nodes 0-1, {3,4} on nodes 2-3 (0-based ids)
  LayerPlacement mro{4, {{0, 1}, {0, 1}, {2, 3}, {2, 3}}};
  FrontierOptions o;
  o.nodes = nodes, o.slots = slots, o.floor = 2;
  auto f = placement_frontier({d}, o, {{"mro", {mro}}});
  REQUIRE(f.ok());
  auto given = std::find_if(f->points.begin(), f->points.end(), [](const FrontierPoint& p) { return p.name == "mro"; });
  REQUIRE(given != f->points.end());
  CHECK(given->layers[0].nodes == mro.nodes);
  CHECK(given->p[1] == doctest::Approx(4.0 / 6));
  CHECK(given->on_frontier);
  auto same = std::find_if(f->points.begin(), f->points.end(), [](const FrontierPoint& p) { return p.name == "blocks-2"; });
  REQUIRE(same != f->points.end());
  CHECK_FALSE(same->on_frontier);
  CHECK(same->beaten_by == "mro");
}

TEST_CASE("the balance bound: an expert on few nodes loads one of them") {
  // 4 nodes, mean work 100/4 = 25; expert 0 has 60 tokens on 2 replicas: 30 on some node, 1.2x.
  LayerDemand d{{2, 2, 2, 2}, {60, 20, 10, 10}};
  CHECK(balance_bound(d, 4) == doctest::Approx(1.2));
  LayerDemand even{{2, 2, 2, 2}, {25, 25, 25, 25}};
  CHECK(balance_bound(even, 4) == 1.0);
  LayerDemand idle{{2, 2, 2, 2}, {0, 0, 0, 0}};
  CHECK(balance_bound(idle, 4) == 1.0);
}

TEST_CASE("the frontier refuses replicas that do not fill the slots, and mismatched candidates") {
  FrontierOptions o;
  o.nodes = 4, o.slots = 2, o.floor = 2;
  auto short_of = placement_frontier({LayerDemand{{2, 2, 2}, {1, 1, 1}}}, o);
  REQUIRE_FALSE(short_of.ok());
  CHECK(short_of.error().message().find("add up to 6, not to the 8 slots") != std::string::npos);
  auto loads = placement_frontier({LayerDemand{{2, 2, 2, 2}, {1, 1}}}, o);
  REQUIRE_FALSE(loads.ok());
  CHECK(loads.error().message().find("2 loads for 4 experts") != std::string::npos);
  auto wrong = placement_frontier({LayerDemand{{2, 2, 2, 2}, {1, 1, 1, 1}}}, o, {{"mine", {LayerPlacement{4, {{0, 1}}}}}});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message().find("candidate 'mine' layer 0 has 1 nodes, not 4") != std::string::npos);
}
