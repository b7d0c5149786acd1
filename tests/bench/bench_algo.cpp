// bench_algo.cpp — timings of the policy algorithm library (engine/policy/algo), printed as a
// markdown table, with a peer measured in the same run where one exists:
//  - recovery probability of an MRO-like plan, 1024 nodes × 256 experts × 8 slots, k = 1..4
//    (target ≤ 10 ms per k), against full enumeration of the C(1024, k) failure sets (what
//    Lazarus does) where that finishes in reasonable time;
//  - Hopcroft–Karp and min-cost max-flow on representative sizes;
//  - SPARe's reordering controller at N = 1000, r = 10, per failure, over sequences of failures
//    up to the wipe-out (target ≤ 20 ms; SPARe reports "sub-100 ms");
//  - MoEtion's window search on 256 experts × 24 layers, against the paper's equal-run sizing;
//  - the frontier's layouts of one layer (blocks of c, chain, mixed) at 1024 nodes, before the
//    balancer: what one construction costs a plan of that size (mixed was O(replicas x nodes^2));
//  - the dispatcher's split of a layer's tokens by the step's counts (train.dispatch = "counts",
//    core/expert_split.h), per layer and step, against the even split, on Zipf loads over replicas
//    in proportion to them (at least 2 each) dealt round robin.
//
// usage: bench_algo [failure sequences for SPARe = 3]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/expert_split.h"
#include "policy/algo/flow.h"
#include "policy/algo/matching.h"
#include "policy/algo/moetion.h"
#include "policy/algo/placement_layouts.h"
#include "policy/algo/recovery.h"
#include "policy/algo/rng.h"
#include "policy/algo/spare.h"

using namespace sal::algo;

namespace {

constexpr int kNodes = 1024;
constexpr int kExperts = 256;
constexpr int kSlots = 8;
constexpr int kFloor = 2;    // fault-tolerance floor f: every expert on at least 2 nodes
constexpr int kLayers = 24;

// The value of a result the benchmark cannot do without; exits with the error otherwise.
template <class T>
T must(sal::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "bench_algo: %s: %s\n", what, r.error().message().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

double ms_since(int64_t start_ns) { return double(sal::mono_ns() - start_ns) / 1e6; }

// Median wall time of `fn` over `reps` runs, in ms.
double time_ms(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const int64_t start = sal::mono_ns();
    fn();
    t.push_back(ms_since(start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const std::string& what, const std::string& size, const std::string& how, double ms,
         const std::string& note) {
  std::printf("| %s | %s | %s | %.3f | %s |\n", what.c_str(), size.c_str(), how.c_str(), ms,
              note.c_str());
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// ---- MRO-like plan ----------------------------------------------------------------------------

// Replica counts proportional to a Zipf load, at least kFloor, summing to nodes × slots.
std::vector<int> replica_counts(Rng& rng) {
  std::vector<double> load(kExperts);
  for (int e = 0; e < kExperts; ++e)
    load[e] = 1.0 / std::pow(e + 1.0, 1.5) * (0.8 + 0.4 * double(rng.below(1000)) / 1000);
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  const int spare = kNodes * kSlots - kFloor * kExperts;
  std::vector<int> r(kExperts);
  int used = 0;
  for (int e = 0; e < kExperts; ++e) used += r[e] = kFloor + int(load[e] / total * spare);
  for (int e = 0; used < kNodes * kSlots; e = (e + 1) % kExperts, ++used) ++r[e];
  return r;
}

// Experts by ascending replica count in groups of kSlots; each group fills every slot of a fresh
// node group as large as its smallest count (nested node sets), the extra replicas go round-robin
// over the nodes left. Minimal node sets are the disjoint node groups, as in Lazarus's MRO.
LayerPlacement mro_like_layer(Rng& rng) {
  const auto count = replica_counts(rng);
  std::vector<int> order(kExperts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count[a] < count[b]; });
  LayerPlacement layer{kExperts, std::vector<std::vector<int>>(kNodes)};
  int next_node = 0;
  std::vector<int> extra;
  for (int g = 0; g < kExperts / kSlots; ++g) {
    const int rep = count[order[g * kSlots]];
    for (int n = 0; n < rep; ++n, ++next_node)
      for (int i = 0; i < kSlots; ++i) layer.nodes[next_node].push_back(order[g * kSlots + i]);
    for (int i = 0; i < kSlots; ++i)
      for (int x = rep; x < count[order[g * kSlots + i]]; ++x)
        extra.push_back(order[g * kSlots + i]);
  }
  const int left = kNodes - next_node;
  for (size_t i = 0; i < extra.size(); ++i)
    layer.nodes[next_node + int(i % size_t(left))].push_back(extra[i]);
  return layer;
}

// The same placement with the nodes renumbered at random.
LayerPlacement shuffled_nodes(LayerPlacement layer, Rng& rng) {
  for (int i = kNodes - 1; i > 0; --i)
    std::swap(layer.nodes[i], layer.nodes[rng.below(uint64_t(i) + 1)]);
  return layer;
}

// The peer: visit every k-subset of the nodes and check every expert (Lazarus's enumeration).
double full_enumeration(const LayerPlacement& layer, int k) {
  std::vector<std::vector<int>> nodes_of(size_t(layer.experts));
  for (int n = 0; n < kNodes; ++n)
    for (int e : layer.nodes[n]) nodes_of[e].push_back(n);
  std::vector<int> f(static_cast<size_t>(k));
  std::iota(f.begin(), f.end(), 0);
  std::vector<char> failed(kNodes, 0);
  uint64_t total = 0, alive = 0;
  while (true) {
    for (int n : f) failed[n] = 1;
    bool ok = true;
    for (const auto& s : nodes_of)
      ok = ok && std::any_of(s.begin(), s.end(), [&](int n) { return !failed[n]; });
    for (int n : f) failed[n] = 0;
    ++total;
    alive += ok;
    int i = k - 1;
    while (i >= 0 && f[i] == kNodes - k + i) --i;
    if (i < 0) break;
    ++f[i];
    for (int j = i + 1; j < k; ++j) f[j] = f[j - 1] + 1;
  }
  return double(alive) / double(total);
}

void bench_recovery() {
  Rng rng(1);
  const LayerPlacement layer = mro_like_layer(rng);
  std::vector<LayerPlacement> layers;  // each layer's node groups on its own nodes: sets overlap
  for (int l = 0; l < kLayers; ++l) layers.push_back(shuffled_nodes(mro_like_layer(rng), rng));
  const std::string size = "1024 nodes × 256 experts × 8 slots";
  for (int k = 1; k <= 4; ++k) {
    RecoveryEstimate e;
    const double ms = time_ms(20, [&] { e = must(recovery_probability(layer, k), "recovery"); });
    row("recovery P(k), one layer, k = " + std::to_string(k), size,
        std::string(method_name(e.method)), ms, "p = " + fmt("%.12f", e.p) + " (target ≤ 10 ms)");
  }
  double per_set_ms = 0;
  for (int k = 1; k <= 2; ++k) {
    double p = 0;
    const double ms = time_ms(1, [&] { p = full_enumeration(layer, k); });
    per_set_ms = ms / (k == 1 ? 1024.0 : 1024.0 * 1023 / 2);
    row("peer: enumerate all C(1024, k), k = " + std::to_string(k), size, "exact", ms,
        "p = " + fmt("%.12f", p));
  }
  row("peer: enumerate all C(1024, k), k = 3", size, "exact", per_set_ms * 1024.0 * 1023 * 1022 / 6,
      "extrapolated from k = 2 (1.8e8 failure sets), not run");
  for (int k = 1; k <= 4; ++k) {
    RecoveryEstimate e;
    const double ms =
        time_ms(3, [&] { e = must(joint_recovery_probability(layers, k), "joint recovery"); });
    std::string note = "p = " + fmt("%.6f", e.p);
    if (e.method == RecoveryMethod::monte_carlo)
      note += " ± " + fmt("%.6f", (e.hi - e.lo) / 2) + ", 200k samples";
    row("recovery P(k), 24 layers jointly, k = " + std::to_string(k), size,
        std::string(method_name(e.method)), ms, note);
  }
  std::vector<RecoveryEstimate> curve;
  const double ms =
      time_ms(5, [&] { curve = must(recovery_curve({layer}, kNodes), "recovery curve"); });
  row("recovery curve k = 0..1024, one layer", size, "closed-form", ms, "whole curve, one product");
}

// ---- Matching and flow -------------------------------------------------------------------------

void bench_matching() {
  Rng rng(2);
  for (int n : {10'000, 100'000}) {
    std::vector<std::vector<int>> adj(static_cast<size_t>(n));
    for (auto& a : adj)
      for (int i = 0; i < 4; ++i) a.push_back(int(rng.below(uint64_t(n))));
    MatchingResult m;
    const double ms = time_ms(5, [&] { m = hopcroft_karp(n, n, adj); });
    row("Hopcroft–Karp, random degree 4", std::to_string(n) + " × " + std::to_string(n), "—", ms,
        "matched " + std::to_string(m.size));
  }
}

void bench_flow() {
  Rng rng(3);
  for (int n : {100, 300}) {
    std::vector<int64_t> cost(size_t(n) * n);
    for (auto& c : cost) c = int64_t(rng.below(1000));
    sal::algo::FlowResult r;
    const double ms = time_ms(3, [&] {
      MinCostFlow f(2 * n + 2);
      for (int i = 0; i < n; ++i) {
        (void)f.add_edge(2 * n, i, 1, 0);
        (void)f.add_edge(n + i, 2 * n + 1, 1, 0);
        for (int j = 0; j < n; ++j) (void)f.add_edge(i, n + j, 1, cost[size_t(i) * n + j]);
      }
      r = must(f.solve(2 * n, 2 * n + 1), "assignment flow");
    });
    row("min-cost flow, dense assignment", std::to_string(n) + " × " + std::to_string(n),
        "SSP + Dijkstra", ms, "cost " + std::to_string(r.cost));
  }
  const int nodes = 5000, edges = 50'000;
  sal::algo::FlowResult r;
  const double ms = time_ms(3, [&] {
    Rng g(4);
    MinCostFlow f(nodes);
    for (int e = 0; e < edges; ++e)
      (void)f.add_edge(int(g.below(nodes)), int(g.below(nodes)), int64_t(1 + g.below(10)),
                       int64_t(g.below(100)));
    r = must(f.solve(0, nodes - 1), "sparse flow");
  });
  row("min-cost flow, random sparse graph", "5000 nodes, 50000 edges", "SSP + Dijkstra", ms,
      "flow " + std::to_string(r.flow));
}

// ---- SPARe -------------------------------------------------------------------------------------

void bench_spare(int sequences) {
  const auto layout = must(spare_layout(1000, 10), "SPARe layout");
  std::vector<double> t;
  int reordered = 0, moves = 0, max_depth = 0;
  for (int seq = 0; seq < sequences; ++seq) {
    Rng rng(uint64_t(100 + seq));
    ShardStacks s = initial_stacks(layout);
    std::vector<int> order(1000);
    std::iota(order.begin(), order.end(), 0);
    for (int i = 999; i > 0; --i) std::swap(order[i], order[rng.below(uint64_t(i) + 1)]);
    for (int g : order) {
      s.alive[g] = false;
      const int64_t start = sal::mono_ns();
      const auto r = must(reorder(s), "reorder");
      t.push_back(ms_since(start));
      if (r.outcome == ReorderOutcome::wiped_out) break;
      reordered += r.outcome == ReorderOutcome::reordered;
      moves += r.moves;
      max_depth = std::max(max_depth, r.depth);
      s.stacks = r.stacks;
    }
  }
  std::vector<double> sorted = t;
  std::sort(sorted.begin(), sorted.end());
  const double mean = std::accumulate(t.begin(), t.end(), 0.0) / double(t.size());
  const double p99 = sorted[std::min(sorted.size() - 1, size_t(0.99 * double(sorted.size())))];
  const std::string size = "N = 1000, r = 10";
  const std::string note = std::to_string(t.size()) + " failures in " + std::to_string(sequences) +
                           " sequences; " + std::to_string(reordered) + " reordered, " +
                           std::to_string(moves) + " moves, depth ≤ " + std::to_string(max_depth);
  row("SPARe reorder per failure, mean", size, "HK-fixed → HK-free → MCMF", mean,
      note + " (target ≤ 20 ms)");
  row("SPARe reorder per failure, p99", size, "HK-fixed → HK-free → MCMF", p99,
      "max " + fmt("%.3f", sorted.back()) + " ms");
  SpareSimResult sim;
  const double ms = time_ms(1, [&] {
    sim = must(simulate_spare(1000, 10, {1000, 7, false}), "simulation");
  });
  row("SPARe Monte Carlo, failures endured", "N = 1000, r = 10, 1000 trials", "simulation", ms,
      "mean " + fmt("%.1f", sim.mean_endured) +
          " vs μ = " + fmt("%.1f", *mean_failures_endured(1000, 10)));
}

// ---- MoEtion ----------------------------------------------------------------------------------

// Operators of a 24-layer model with 256 experts per layer: an expert is d→4d→d (d = 512, 2.1 M
// parameters), each layer's non-expert part 4 d² + gate; compute weights 2 bytes per parameter,
// full state 12 (fp32 master + Adam moments).
std::vector<CheckpointOperator> model_operators(Rng& rng) {
  const uint64_t d = 512, expert_params = 8 * d * d + 5 * d, dense_params = 4 * d * d + 256 * d;
  std::vector<CheckpointOperator> ops;
  for (int l = 0; l < kLayers; ++l) {
    for (int e = 0; e < kExperts; ++e)
      ops.push_back({12 * expert_params, 2 * expert_params, double(rng.below(1'000'000)), true});
    ops.push_back({12 * dense_params, 2 * dense_params, 0, false});
  }
  ops.push_back({12 * 256 * d, 2 * 256 * d, 0, false});  // embeddings
  return ops;
}

// The paper's sizing as a peer: a operators per iteration, a stepped down from n until the worst
// run fits (prefix sums; O(n log n) in all).
int equal_run_window(const std::vector<CheckpointOperator>& ops, double budget) {
  const auto order = popularity_order(ops);
  std::vector<uint64_t> prefix{0};
  uint64_t compute = 0;
  for (int i : order) {
    prefix.push_back(prefix.back() + ops[i].full_bytes - ops[i].compute_bytes);
    compute += ops[i].compute_bytes;
  }
  const size_t n = order.size();
  for (size_t a = n; a >= 1; --a) {
    uint64_t worst = 0;
    for (size_t s = 0; s < n; s += a)
      worst = std::max(worst, prefix[std::min(n, s + a)] - prefix[s]);
    if (double(compute + worst) <= budget) return int((n + a - 1) / a);
  }
  return -1;
}

void bench_window() {
  Rng rng(5);
  const auto ops = model_operators(rng);
  const double iteration_s = 2.0, pcie = 25e9;
  WindowSchedule w;
  const double ms =
      time_ms(10, [&] { w = must(find_window(ops, iteration_s, pcie), "window search"); });
  const std::string size = std::to_string(ops.size()) + " operators (256 experts × 24 layers)";
  row("MoEtion window search", size, "greedy + balanced", ms,
      "W_sparse = " + std::to_string(w.window) + " at 2 s/iteration, 25 GB/s");
  int peer = 0;
  const double peer_ms = time_ms(10, [&] { peer = equal_run_window(ops, iteration_s * pcie); });
  row("peer: paper's equal-run sizing", size, "ops/iteration stepped down", peer_ms,
      "W_sparse = " + std::to_string(peer));
}

// One layer: `experts` Zipf(1.2) loads over `assignments` tokens, replicas in proportion (at least
// 2), dealt round robin over `workers` workers of equal slots.
// ---- the frontier's layouts ----------------------------------------------------------------------

void bench_layouts() {
  Rng rng(11);
  LayerDemand d{replica_counts(rng), {}};
  for (int e = 0; e < kExperts; ++e)
    d.loads.push_back(double(d.replicas[size_t(e)]) * (0.9 + 0.2 * double(rng.below(1000)) / 1000));
  const std::string size = std::to_string(kNodes) + " nodes × " + std::to_string(kExperts) + " experts × " +
                           std::to_string(kSlots) + " slots";
  using Layout = std::function<sal::Result<LayerPlacement>()>;
  for (const auto& [name, layout] : std::vector<std::pair<std::string, Layout>>{
           {"mixed", [&] { return mixed_layout(d, kNodes, kSlots, kFloor); }},
           {"peer: chain", [&] { return chain_layout(d, kNodes, kSlots, kFloor); }},
           {"peer: blocks of c", [&] { return blocks_layout(d, kNodes, kSlots, kSlots, kFloor); }}}) {
    must(layout(), name.c_str());
    row("frontier layout, one layer: " + name, size, "before the balancer", time_ms(5, [&] { (void)layout(); }),
        "median of 5");
  }
}

void bench_split_at(int experts, int workers, int slots, uint64_t assignments) {
  Rng rng(9);
  std::vector<double> w(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) w[size_t(e)] = 1 / std::pow(double(e + 1), 1.2);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<uint64_t> totals;
  for (double x : w) totals.push_back(uint64_t(double(assignments) * x / sum));
  const int spare = workers * slots - 2 * experts;
  sal::SplitTable units(size_t(experts), std::vector<uint32_t>(size_t(workers), 0));
  int next = 0;
  for (int e = 0; e < experts; ++e) {
    const int r = 2 + int(std::floor(double(spare) * w[size_t(e)] / sum));
    for (int k = 0; k < r; ++k) units[size_t(e)][size_t(next++ % workers)] += 1;
  }
  sal::SplitTable even, counts;
  const double even_ms = time_ms(20, [&] { even = sal::even_split(totals, units, {}); });
  const double counts_ms = time_ms(20, [&] { counts = sal::balanced_split(totals, units, {}); });
  const std::string size = std::to_string(experts) + " experts × " + std::to_string(workers) + " workers, " +
                           std::to_string(assignments) + " assignments";
  row("dispatch split of a layer", size, "by the step's counts", counts_ms,
      "imbalance " + fmt("%.3f", sal::split_imbalance(counts, {})));
  row("peer: even split (Lazarus)", size, "each replica the same part", even_ms,
      "imbalance " + fmt("%.3f", sal::split_imbalance(even, {})));
}

void bench_split() {
  bench_split_at(32, 16, 8, 4096);      // the SmartMoE trace's layer on bench_skew's 16 × 8
  bench_split_at(256, 64, 16, 1 << 20);  // a large GPU job's layer
}

}  // namespace

int main(int argc, char** argv) {
  const int sequences = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured
  std::printf("| benchmark | size | method | ms | notes |\n|---|---|---|---|---|\n");
  bench_recovery();
  bench_matching();
  bench_flow();
  bench_spare(sequences);
  bench_window();
  bench_layouts();
  bench_split();
  return 0;
}
