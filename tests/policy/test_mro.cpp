// test_mro.cpp — the shipped `mro` placement policy cannot be beaten (issue 3). "Beats" is
// lexicographic on the per-layer survival curve: higher P(k) at the first k where two placements
// differ. With the same N, that is fewer killed failure sets at the first differing k, which
// sal::algo::failure_counts computes exactly for N ≤ 16.
//   (a) counterexamples to the construction as the issue first described it (most popular first,
//       node groups sized by the most replicated member, leftovers where they fit), pinned with
//       their numbers, and what mro gives instead;
//   (b) random small instances (N ≤ 12, replicas from lazarus, uniform, eplb and at random): mro is
//       valid and neither spread, compact nor thousands of random valid placements beat it;
//   (c) tiny instances against the exhaustive optimum;
//   (d) properties of the construction when its blocks fit: disjoint minimal sets, as few as the
//       counting bound allows, closed-form recovery; layers aligned; 1024 nodes stay valid.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>

#include "plan/validate.h"
#include "policy/algo/placement_search.h"
#include "policy/algo/recovery.h"
#include "policy/kinds.h"
#include "policy/policy_set.h"

using namespace sal;
using namespace sal::policy;
using sal::algo::FailureCounts;

namespace {

using Layer = std::vector<std::vector<uint32_t>>;  // node -> expert ids (0-based)

struct Instance {
  uint32_t nodes = 0, slots = 0, floor = 1;
  std::vector<uint32_t> replicas;
  std::vector<double> loads;  // tie-breaks only; empty: all equal
  uint32_t experts() const { return uint32_t(replicas.size()); }
};

std::string describe(const Instance& in) {
  std::ostringstream o;
  o << "N=" << in.nodes << " c=" << in.slots << " f=" << in.floor << " r=";
  for (uint32_t r : in.replicas) o << r << ",";
  return o.str();
}

std::string describe(const FailureCounts& k) {
  std::ostringstream o;
  for (uint64_t x : k) o << x << " ";
  return o.str();
}

// One generation per policy, loaded once (loading runs the selftest).
class Policies {
 public:
  Layer place(const std::string& name, const Instance& in) {
    auto& g = gens_[name];
    if (!g) {
      auto loaded = set_.check(Kind::placement, name);
      REQUIRE_MESSAGE(loaded.ok(), loaded.error().message());
      g = std::move(*loaded);
    }
    std::vector<double> loads = in.loads.empty() ? std::vector<double>(in.replicas.size(), 1.0) : in.loads;
    PlacementInput pin{in.nodes, in.slots, in.experts(), in.floor, {in.replicas}, {loads}, {}};
    auto p = g->decide(pin);
    REQUIRE_MESSAGE(p.ok(), name << ": " << p.error().message());
    return std::get<PlacementProposal>(*p).placement.at(0);
  }

  std::vector<uint32_t> allocate(const std::string& name, uint32_t nodes, uint32_t slots, uint32_t f,
                                 const std::vector<double>& loads, uint32_t& floor) {
    auto g = set_.check(Kind::allocation, name);
    REQUIRE(g.ok());
    AllocationInput in{nodes, slots, uint32_t(loads.size()), f, {loads}};
    auto p = (*g)->decide(in);
    REQUIRE(p.ok());
    auto a = std::get<AllocationProposal>(*p);
    REQUIRE(ops_for(Kind::allocation).validate(a, in).ok());
    floor = a.floor;
    return a.replicas.at(0);
  }

 private:
  PolicySet set_;
  std::map<std::string, std::unique_ptr<Generation>> gens_;
};

Status check(const Layer& l, const Instance& in) {
  return plan::check_placement(plan::LayerPlan{in.replicas, l}, in.experts(), in.nodes, in.slots, in.floor);
}

FailureCounts killed(const Layer& l, const Instance& in) {
  algo::LayerPlacement lp{int(in.experts()), {}};
  for (const auto& node : l) lp.nodes.emplace_back(node.begin(), node.end());
  auto k = algo::failure_counts(lp);
  REQUIRE(k.ok());
  return *k;
}

double p_of(const FailureCounts& killed, int k) {
  const int n = int(killed.size()) - 1;
  double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return 1.0 - double(killed[size_t(k)]) / c;
}

// The construction as issue 3 first described it, which mro.lua used to be: experts by descending
// replicas (then load), groups of c, each group's node group as large as its most replicated
// member's count (cut short at the last node), members on a prefix of it; every replica that did
// not fit goes to the node with the most free slots that does not hold the expert yet.
Layer textbook(const Instance& in) {
  std::vector<uint32_t> order(in.experts());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return in.replicas[a] > in.replicas[b]; });
  Layer out(in.nodes);
  std::vector<uint32_t> left;
  uint32_t cursor = 0;
  for (size_t g = 0; g < order.size(); g += in.slots) {
    const uint32_t size = std::min(in.replicas[order[g]], in.nodes - cursor);
    for (size_t i = g; i < std::min(order.size(), g + in.slots); ++i) {
      const uint32_t e = order[i], here = std::min(in.replicas[e], size);
      for (uint32_t n = cursor; n < cursor + here; ++n) out[n].push_back(e);
      for (uint32_t j = here; j < in.replicas[e]; ++j) left.push_back(e);
    }
    cursor += size;
  }
  for (uint32_t e : left) {
    size_t best = 0;
    long best_score = -1;
    for (size_t n = 0; n < out.size(); ++n) {
      const long free = long(in.slots) - long(out[n].size());
      if (free <= 0) continue;
      const bool holds = std::find(out[n].begin(), out[n].end(), e) != out[n].end();
      if ((holds ? 0 : 1'000'000) + free > best_score) best = n, best_score = (holds ? 0 : 1'000'000) + free;
    }
    out[best].push_back(e);
  }
  return out;
}

// The lexicographically best valid placement, by enumerating node multisets in non-increasing
// order (nodes are interchangeable). Tiny instances only.
class Exhaustive {
 public:
  explicit Exhaustive(const Instance& in) : in_(in), left_(in.replicas), cur_(in.nodes) {}

  FailureCounts best() {
    node(0, {});
    REQUIRE_MESSAGE(!best_.empty(), "no valid placement for " << describe(in_));
    return best_;
  }

 private:
  void node(uint32_t n, const std::vector<uint32_t>& prev) {
    if (n == in_.nodes) {
      if (!check(cur_, in_).ok()) return;
      auto k = killed(cur_, in_);
      if (best_.empty() || algo::compare_failure_counts(k, best_) < 0) best_ = k;
      return;
    }
    std::vector<uint32_t> pick;
    choose(n, 0, pick, prev);
  }
  void choose(uint32_t n, uint32_t from, std::vector<uint32_t>& pick, const std::vector<uint32_t>& prev) {
    if (pick.size() == in_.slots) {
      if (!prev.empty() && pick > prev) return;
      cur_[n] = pick;
      node(n + 1, pick);
      return;
    }
    for (uint32_t e = from; e < in_.experts(); ++e) {
      if (left_[e] == 0) continue;
      --left_[e];
      pick.push_back(e);
      choose(n, e, pick, prev);
      pick.pop_back();
      ++left_[e];
    }
  }

  const Instance& in_;
  std::vector<uint32_t> left_;
  Layer cur_;
  FailureCounts best_;
};

// A uniformly shuffled placement, its floor violations repaired by random swaps; false if that fails.
bool random_valid(std::mt19937& rng, const Instance& in, Layer& out) {
  std::vector<uint32_t> all;
  for (uint32_t e = 0; e < in.experts(); ++e) all.insert(all.end(), in.replicas[e], e);
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::shuffle(all.begin(), all.end(), rng);
    out.assign(in.nodes, {});
    for (size_t i = 0; i < all.size(); ++i) out[i / in.slots].push_back(all[i]);
    for (int step = 0; step < 400 && !check(out, in).ok(); ++step) {
      const uint32_t a = rng() % in.nodes, b = rng() % in.nodes, i = rng() % in.slots, j = rng() % in.slots;
      const uint32_t e = out[a][i];
      if (std::count(out[a].begin(), out[a].end(), e) < 2) continue;
      if (std::count(out[b].begin(), out[b].end(), e) > 0) continue;
      std::swap(out[a][i], out[b][j]);
    }
    if (check(out, in).ok()) return true;
  }
  return false;
}

// Replicas >= f summing to N*c, skewed towards a few experts.
std::vector<uint32_t> random_counts(std::mt19937& rng, uint32_t experts, uint32_t total, uint32_t f) {
  std::vector<uint32_t> r(experts, f);
  for (uint32_t i = experts * f; i < total; ++i) ++r[rng() % 3 == 0 ? 0 : rng() % experts];
  return r;
}

// Whether the blocks of the construction fit in N nodes (groups of c by ascending count).
bool blocks_fit(const Instance& in) {
  auto r = in.replicas;
  std::sort(r.begin(), r.end());
  uint64_t nodes = 0;
  for (size_t g = 0; g < r.size(); g += in.slots) nodes += r[g];
  return nodes <= in.nodes;
}

// The inclusion-minimal expert node sets of a layer.
std::vector<std::vector<uint32_t>> minimal_sets(const Layer& l, uint32_t experts) {
  std::vector<std::vector<uint32_t>> sets(experts);
  for (uint32_t n = 0; n < l.size(); ++n)
    for (uint32_t e : l[n])
      if (sets[e].empty() || sets[e].back() != n) sets[e].push_back(n);
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  std::vector<std::vector<uint32_t>> out;
  for (const auto& s : sets) {
    bool minimal = true;
    for (const auto& t : sets)
      if (t != s && t.size() < s.size() && std::includes(s.begin(), s.end(), t.begin(), t.end())) minimal = false;
    if (minimal) out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("counterexample: the paper's construction breaks the floor, mro survives any 2 failures") {
  // 4 experts x 3 replicas on 4 nodes x 3 slots, f = 2. The first group fills nodes 0-2; the last
  // node group is cut short to node 3, which then holds all three replicas of the fourth expert.
  Policies pol;
  Instance in{4, 3, 2, {3, 3, 3, 3}, {}};
  Layer t = textbook(in);
  CHECK_FALSE(check(t, in).ok());
  CHECK(killed(t, in) == FailureCounts{0, 1, 3, 4, 1});  // P(1) = 0.75: one failure can lose an expert
  Layer m = pol.place("mro", in);
  REQUIRE(check(m, in).ok());
  CHECK(killed(m, in) == FailureCounts{0, 0, 0, 4, 1});  // every expert on 3 distinct nodes
  CHECK(killed(m, in) == Exhaustive(in).best());
}

TEST_CASE("counterexample: five experts x 2 replicas on 5 nodes x 2 slots") {
  // The textbook leaves expert 4 twice on node 4 (invalid). The best placement pairs two experts on
  // one pair of nodes and the other three in a triangle: 4 distinct pairs, P(2) = 1 - 4/10 = 0.6.
  Policies pol;
  Instance in{5, 2, 2, {2, 2, 2, 2, 2}, {}};
  CHECK_FALSE(check(textbook(in), in).ok());
  Layer m = pol.place("mro", in);
  REQUIRE(check(m, in).ok());
  CHECK(killed(m, in) == FailureCounts{0, 0, 4, 10, 5, 1});
  CHECK(p_of(killed(m, in), 2) == doctest::Approx(0.6));
  CHECK(killed(m, in) == Exhaustive(in).best());
}

TEST_CASE("counterexample: the construction is valid but beaten (descending groups waste nodes)") {
  // r = 6,4,2,2,2,2 on 6 nodes x 3 slots, f = 2. Descending, the first group {6,4,2} takes all six
  // nodes and the other three experts land on three distinct pairs: P(2) = 1 - 3/15 = 0.8.
  // Ascending, the four 2-replica experts need only two blocks (the 4 and the 6 nest on them):
  // P(2) = 1 - 2/15 = 0.867, and that is the optimum.
  Policies pol;
  Instance in{6, 3, 2, {6, 4, 2, 2, 2, 2}, {}};
  Layer t = textbook(in);
  REQUIRE(check(t, in).ok());
  CHECK(killed(t, in) == FailureCounts{0, 0, 3, 12, 15, 6, 1});
  Layer m = pol.place("mro", in);
  CHECK(killed(m, in) == FailureCounts{0, 0, 2, 8, 11, 6, 1});
  CHECK(p_of(killed(m, in), 2) == doctest::Approx(1 - 2.0 / 15));
  CHECK(killed(m, in) == Exhaustive(in).best());
}

TEST_CASE("counterexample: a cut-short last block that is still valid is beaten too") {
  // r = 10,6,2,4,2 on 6 nodes x 4 slots, f = 2: ascending blocks {2,2,4,6} on nodes 0-1 and the
  // 10-replica expert cut short to nodes 2-5 give killed (0,0,1,4,7,6,1). Letting the hot expert
  // take one slot of the first block (its 6-replica member moves out) removes the 4-node set: 6 at k = 4.
  Policies pol;
  Instance in{6, 4, 2, {10, 6, 2, 4, 2}, {}};
  Layer m = pol.place("mro", in);
  REQUIRE(check(m, in).ok());
  CHECK(killed(m, in) == FailureCounts{0, 0, 1, 4, 6, 6, 1});
  CHECK(killed(m, in) == Exhaustive(in).best());
}

TEST_CASE("counterexample: SmartMoE layer 0 on Lazarus's testbed with 8 slots (10 nodes, f = 2)") {
  // Lazarus's allocation of the trace's layer 0 (iteration 5001): 27 experts at the floor of 2, two
  // with 3, one with 8, two with 6. At most 8 floor experts share a pair of nodes, so any placement
  // has at least ceil(27/8) = 4 killed pairs: mro reaches that bound, P(2) = 41/45.
  Policies pol;
  Instance in{10, 8, 2, {2, 2, 2, 2, 2, 3, 2, 2, 2, 2, 3, 2, 2, 2, 2, 2, 2, 2, 8, 2, 2, 6, 2, 2, 2, 2, 6, 2, 2, 2, 2, 2}, {}};
  Layer t = textbook(in), c = pol.place("compact", in), m = pol.place("mro", in);
  REQUIRE(check(m, in).ok());
  const auto km = killed(m, in), kt = killed(t, in), kc = killed(c, in);
  CHECK(km[2] == 4);
  CHECK(p_of(km, 2) == doctest::Approx(41.0 / 45));
  CHECK(kt[2] == 8);  // the textbook construction: P(2) = 37/45 = 0.822
  CHECK(kc[2] == 6);  // compact: P(2) = 39/45 = 0.867 — it beats the textbook, not mro
  CHECK(algo::compare_failure_counts(km, kc) < 0);
  CHECK(algo::compare_failure_counts(kc, kt) < 0);
}

TEST_CASE("counterexample: uniform replicas that do not fit in blocks — mro is no worse than spread") {
  // 12 experts x 6 replicas on 9 nodes x 8 slots: one block of 8 experts on 6 nodes leaves 3 nodes
  // for 4 experts (a 3-node set). Round robin has three 6-node sets and nothing smaller.
  Policies pol;
  Instance in{9, 8, 2, std::vector<uint32_t>(12, 6), {}};
  const auto ks = killed(pol.place("spread", in), in);
  CHECK(ks == FailureCounts{0, 0, 0, 0, 0, 0, 3, 9, 9, 1});
  Layer m = pol.place("mro", in);
  REQUIRE(check(m, in).ok());
  CHECK(algo::compare_failure_counts(killed(m, in), ks) <= 0);
}

TEST_CASE("a cut-short tail too large to search is dealt round robin, and stays valid") {
  // 21 nodes x 8 slots, f = 3: blocks of 3 and 16 nodes leave 2 nodes for the last expert's 16
  // replicas (below the floor). The tail (18 nodes) is past the exact search's 16, so the last two
  // groups are dealt round robin over their 18 nodes: every expert there spans 16.
  Policies pol;
  std::vector<uint32_t> r(8, 3);
  r.insert(r.end(), 9, 16);
  Instance in{21, 8, 3, r, {}};
  Layer m = pol.place("mro", in);
  auto valid = check(m, in);
  REQUIRE_MESSAGE(valid.ok(), valid.error().message());
  algo::LayerPlacement lp{int(in.experts()), {}};
  for (const auto& node : m) lp.nodes.emplace_back(node.begin(), node.end());
  // The floor experts' block is untouched: two failures lose nothing, three lose it in 1 of C(21,3).
  CHECK(algo::recovery_probability(lp, 2)->p == 1.0);
  CHECK(algo::recovery_probability(lp, 3)->p == doctest::Approx(1 - 1.0 / 1330).epsilon(1e-12));
}

TEST_CASE("random small instances: mro is valid and nothing tried beats it") {
  Policies pol;
  std::mt19937 rng(2024);
  const char* allocations[] = {"lazarus", "uniform", "eplb", "random"};
  int instances = 0, competitors = 0, cut = 0;
  for (int trial = 0; instances < 120; ++trial) {
    const uint32_t nodes = 2 + rng() % 11, slots = 1 + rng() % 8;
    const uint32_t experts = 2 + rng() % std::min<uint32_t>(23, nodes * slots - 1);
    const uint32_t f = 1 + rng() % 3;
    std::vector<double> loads(experts);
    std::exponential_distribution<double> exp(1.0);
    for (auto& t : loads) t = rng() % 4 == 0 ? 0.0 : std::floor(exp(rng) * 1000);
    const std::string alloc = allocations[trial % 4];
    Instance in{nodes, slots, 1, {}, loads};
    if (alloc == "random") {
      in.floor = std::max<uint32_t>(1, std::min(f, nodes * slots / experts));
      in.replicas = random_counts(rng, experts, nodes * slots, in.floor);
    } else {
      in.replicas = pol.allocate(alloc, nodes, slots, f, loads, in.floor);
    }
    ++instances;
    cut += !blocks_fit(in);
    CAPTURE(alloc);
    CAPTURE(describe(in));
    Layer m = pol.place("mro", in);
    auto valid = check(m, in);
    REQUIRE_MESSAGE(valid.ok(), valid.error().message());
    const auto km = killed(m, in);
    CAPTURE(describe(km));
    auto no_better = [&](const Layer& other, const char* who) {
      if (!check(other, in).ok()) return;  // only valid placements compete
      ++competitors;
      const auto ko = killed(other, in);
      CHECK_MESSAGE(algo::compare_failure_counts(ko, km) >= 0, who << " beats mro: " << describe(ko));
    };
    no_better(pol.place("spread", in), "spread");
    no_better(pol.place("compact", in), "compact");
    Layer r;
    for (int i = 0; i < 2000; ++i)
      if (random_valid(rng, in, r)) no_better(r, "a random placement");
  }
  MESSAGE(instances << " instances (" << cut << " with blocks cut short, repaired by the search), "
                    << competitors << " valid competitors");
  CHECK(cut >= instances / 5);
  CHECK(competitors > 120 * 1000);
}

TEST_CASE("tiny instances: mro equals the exhaustive optimum") {
  Policies pol;
  std::mt19937 rng(77);
  for (int trial = 0; trial < 120; ++trial) {
    const uint32_t nodes = 2 + rng() % 4, slots = 1 + rng() % 3, experts = 2 + rng() % 4;
    const uint32_t f = 1 + rng() % 2;
    if (nodes * slots < experts * f) continue;
    Instance in{nodes, slots, f, random_counts(rng, experts, nodes * slots, f), {}};
    CAPTURE(describe(in));
    Layer m = pol.place("mro", in);
    REQUIRE(check(m, in).ok());
    CHECK(describe(killed(m, in)) == describe(Exhaustive(in).best()));
  }
}

TEST_CASE("when the blocks fit: disjoint minimal sets, as few as possible, closed-form recovery") {
  Policies pol;
  std::mt19937 rng(9);
  int fitted = 0;
  for (int trial = 0; trial < 300 && fitted < 60; ++trial) {
    const uint32_t nodes = 4 + rng() % 60, slots = 1 + rng() % 8;
    const uint32_t groups = 1 + rng() % std::max<uint32_t>(1, nodes / 3);
    const uint32_t experts = std::min(groups * slots, nodes * slots / 2);  // full groups: always fit
    const uint32_t f = 2;
    if (experts < 2) continue;
    Instance in{nodes, slots, f, random_counts(rng, experts, nodes * slots, f), {}};
    if (!blocks_fit(in)) continue;
    ++fitted;
    CAPTURE(describe(in));
    Layer m = pol.place("mro", in);
    REQUIRE(check(m, in).ok());
    auto sets = minimal_sets(m, experts);
    // One block per group of c experts (ascending), as large as its least replicated member.
    auto r = in.replicas;
    std::sort(r.begin(), r.end());
    std::vector<size_t> want, got;
    for (size_t g = 0; g < r.size(); g += slots) want.push_back(r[g]);
    for (const auto& s : sets) got.push_back(s.size());
    std::sort(got.begin(), got.end());
    CHECK(got == want);
    std::vector<int> seen(nodes, 0);
    for (const auto& s : sets)
      for (uint32_t n : s) CHECK(++seen[n] == 1);  // pairwise disjoint
    // The counting bound: c experts at most per set of r_min nodes.
    const auto at_floor = size_t(std::count(r.begin(), r.end(), r[0]));
    CHECK(got.front() == r[0]);
    CHECK(size_t(std::count(got.begin(), got.end(), r[0])) == (at_floor + slots - 1) / slots);
    // The recovery library recognises the structure.
    algo::LayerPlacement lp{int(experts), {}};
    for (const auto& node : m) lp.nodes.emplace_back(node.begin(), node.end());
    auto est = algo::recovery_probability(lp, int(r[0]));
    REQUIRE(est.ok());
    CHECK(est->method == algo::RecoveryMethod::closed_form);
  }
  CHECK(fitted >= 30);
}

TEST_CASE("layers are aligned: the smallest blocks of every layer start at node 0") {
  // Two layers with the same floor experts but different hot ones: both put the floor experts on
  // nodes {0,1} and {2,3}, and layer 1's third block (nodes 4-7) lies inside layer 0's (nodes 4-8),
  // so jointly the two layers fail exactly when layer 1 does.
  Policies pol;
  Instance a{12, 4, 2, {2, 2, 2, 2, 2, 2, 2, 2, 5, 7, 8, 12}, {}};
  Instance b{12, 4, 2, {2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 20}, {}};
  std::vector<algo::LayerPlacement> layers;
  for (const auto& in : {a, b}) {
    algo::LayerPlacement lp{12, {}};
    for (const auto& node : pol.place("mro", in)) lp.nodes.emplace_back(node.begin(), node.end());
    layers.push_back(lp);
  }
  for (int k = 1; k < 12; ++k) {
    auto rep = algo::recovery_report(layers, k);
    REQUIRE(rep.ok());
    CHECK(rep->joint.p == doctest::Approx(rep->layers[1].p));
  }
}

TEST_CASE("1024 nodes x 256 experts x 8 slots: valid, closed-form, the counting bound") {
  Policies pol;
  std::vector<double> loads(256);
  for (size_t e = 0; e < loads.size(); ++e) loads[e] = 1e6 / std::pow(double(e + 1), 1.1);  // Zipf
  Instance in{1024, 8, 2, {}, loads};
  in.replicas = pol.allocate("lazarus", 1024, 8, 2, loads, in.floor);
  Layer m = pol.place("mro", in);
  REQUIRE(check(m, in).ok());
  algo::LayerPlacement lp{256, {}};
  for (const auto& node : m) lp.nodes.emplace_back(node.begin(), node.end());
  const uint32_t least = *std::min_element(in.replicas.begin(), in.replicas.end());
  auto est = algo::recovery_probability(lp, int(least));
  REQUIRE(est.ok());
  CHECK(est->method == algo::RecoveryMethod::closed_form);
  const auto at_least = std::count(in.replicas.begin(), in.replicas.end(), least);
  double sets = 1;  // C(1024, least)
  for (uint32_t i = 1; i <= least; ++i) sets = sets * (1024 - least + i) / i;
  CHECK(est->p == doctest::Approx(1 - double((at_least + 7) / 8) / sets).epsilon(1e-12));
}
