// bench_policy.cpp — the controller's plan path after a node failure at Lazarus scale (target:
// allocation + placement + remap for 1024 nodes × 256 experts × 8 slots in ≤ 50 ms, one layer).
// Each run: a previous plan (lazarus + goodput on 1024 nodes) is held by the physical nodes in a
// random order; one node is lost; then, timed, the shipped Lua policies decide a new plan for the
// 1023 survivors through the real policy generations (ctx built, Lua run, proposal read back) —
// lazarus allocation, then the default placement, goodput (which computes the frontier of balance
// against recovery and picks a point) — and the greedy remap maps it onto the survivors. Loads
// drift between the two plans. The same re-plan is then asked as the driver asks it, told what the
// survivors hold (ctx.current: the placement in force, adjusted, is weighed too), with the
// replicas each way fetches (in all, and by the busiest node). Peers in the same run: the frontier
// alone (C++, algo/frontier.h); the mro, spread and compact placements; and the exact recovery
// probability of the new plan per k (target ≤ 10 ms per k). Prints a markdown table of p50 and max
// over the runs.
//
// usage: bench_policy [runs = 20]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "plan/remap.h"
#include "plan/validate.h"
#include "policy/algo/frontier.h"
#include "policy/algo/recovery.h"
#include "policy/algo/rng.h"
#include "policy/kinds.h"
#include "policy/policy_set.h"

using namespace sal;
using namespace sal::policy;

namespace {

constexpr uint32_t kNodes = 1024;
constexpr uint32_t kExperts = 256;
constexpr uint32_t kSlots = 8;
constexpr uint32_t kFloor = 2;

template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "bench_policy: %s: %s\n", what, r.error().message().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

double ms_since(int64_t start_ns) { return double(mono_ns() - start_ns) / 1e6; }

// CPU time of this thread: the plan path's own work, which other processes on a shared machine do
// not stretch as they stretch the wall time.
int64_t cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// Zipf(1.1) popularity with exponential noise, experts shuffled: the long tail of real MoE layers.
std::vector<double> zipf_loads(algo::Rng& rng) {
  std::vector<double> loads(kExperts);
  for (uint32_t e = 0; e < kExperts; ++e) {
    const double noise = -std::log(1.0 - double(rng.below(1'000'000)) / 1e6);  // Exp(1)
    loads[e] = 1e6 / std::pow(double(e + 1), 1.1) * (0.5 + noise);
  }
  for (size_t i = loads.size(); i > 1; --i) std::swap(loads[i - 1], loads[size_t(rng.below(i))]);
  return loads;
}

// Each load scaled by a factor in [0.8, 1.2): what changes between two rebalances.
std::vector<double> drifted(std::vector<double> loads, algo::Rng& rng) {
  for (auto& t : loads) t *= 0.8 + 0.4 * double(rng.below(1000)) / 1000;
  return loads;
}

class Policies {
 public:
  Generation& get(Kind k, const std::string& name) {
    auto& g = gens_[name];
    if (!g) g = must(set_.check(k, name), name.c_str());
    return *g;
  }
  AllocationProposal allocate(uint32_t nodes, const std::vector<double>& loads) {
    AllocationInput in{nodes, kSlots, kExperts, kFloor, {loads}};
    return std::get<AllocationProposal>(must(get(Kind::allocation, "lazarus").decide(in), "lazarus"));
  }
  // current: what each of the nodes holds under the plan in force ([layer][node][slot]), or empty.
  PlacementProposal place(const std::string& name, uint32_t nodes, const AllocationProposal& a,
                          const std::vector<double>& loads,
                          std::vector<std::vector<std::vector<uint32_t>>> current = {}) {
    PlacementInput in{nodes, kSlots, kExperts, a.floor, a.replicas, {loads}, std::move(current)};
    auto p = std::get<PlacementProposal>(must(get(Kind::placement, name).decide(in), name.c_str()));
    if (auto s = ops_for(Kind::placement).validate(p, in); !s)
      std::fprintf(stderr, "bench_policy: note: %s's plan is invalid: %s\n", name.c_str(), s.error().message().c_str());
    return p;
  }

 private:
  PolicySet set_;
  std::map<std::string, std::unique_ptr<Generation>> gens_;
};

// The most experts one node fetches to take its position under the remap (an expert it lacks, once).
uint64_t most_fetched(const plan::Holdings& held, const plan::Remap& r, const PlacementProposal& p) {
  uint64_t most = 0;
  for (size_t n = 0; n < held.size(); ++n) {
    if (r.position_of_node[n] < 0) continue;
    std::set<uint32_t> lacks;
    for (uint32_t e : p.placement[0][size_t(r.position_of_node[n])])
      if (std::find(held[n][0].begin(), held[n][0].end(), e) == held[n][0].end()) lacks.insert(e);
    most = std::max<uint64_t>(most, lacks.size());
  }
  return most;
}

plan::Plan plan_of(uint32_t nodes, const AllocationProposal& a, const PlacementProposal& p) {
  plan::Plan out;
  out.nodes = nodes, out.slots = kSlots, out.experts = kExperts, out.floor = a.floor;
  out.layers = {plan::LayerPlan{a.replicas[0], p.placement[0]}};
  return out;
}

struct Samples {
  std::vector<double> ms;
  void add(double x) { ms.push_back(x); }
  double p50() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  double max() const { return *std::max_element(ms.begin(), ms.end()); }
};

void row(const std::string& what, const Samples& s, const std::string& note) {
  std::printf("| %s | %.2f | %.2f | %s |\n", what.c_str(), s.p50(), s.max(), note.c_str());
}

std::string fmt(const char* f, double v) {
  char buf[96];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  Policies pol;
  std::map<std::string, Samples> t;
  std::vector<Samples> recovery(5);
  std::vector<std::string> recovery_note(5);
  uint64_t kept = 0, fetched = 0, fetched_current = 0, fetched_most = 0, fetched_most_current = 0;
  size_t frontier_points = 0;

  for (int run = 0; run < runs; ++run) {
    algo::Rng rng(uint64_t(run) + 1);
    // The previous plan, held by the physical nodes in a random order; one node then fails.
    const auto before = zipf_loads(rng);
    const auto a0 = pol.allocate(kNodes, before);
    const auto p0 = pol.place("goodput", kNodes, a0, before);
    std::vector<uint32_t> position(kNodes);
    for (uint32_t n = 0; n < kNodes; ++n) position[n] = n;
    for (size_t i = position.size(); i > 1; --i) std::swap(position[i - 1], position[size_t(rng.below(i))]);
    plan::Holdings held(kNodes);
    for (uint32_t n = 0; n < kNodes; ++n) held[n] = {p0.placement[0][position[n]]};
    std::vector<bool> alive(kNodes, true);
    alive[size_t(rng.below(kNodes))] = false;
    const uint32_t survivors = kNodes - 1;
    const auto loads = drifted(before, rng);

    // Timed: the new plan for the survivors, then the remap onto them.
    const int64_t cpu_start = cpu_ns();
    int64_t start = mono_ns();
    const auto a = pol.allocate(survivors, loads);
    const double alloc_ms = ms_since(start);
    start = mono_ns();
    const auto p = pol.place("goodput", survivors, a, loads);
    const double place_ms = ms_since(start);
    const auto plan = plan_of(survivors, a, p);
    start = mono_ns();
    const auto remap = must(plan::greedy_remap(held, alive, plan), "greedy_remap");
    const double remap_ms = ms_since(start);
    t["alloc"].add(alloc_ms);
    t["goodput"].add(place_ms);
    t["remap"].add(remap_ms);
    t["total"].add(alloc_ms + place_ms + remap_ms);
    t["total cpu"].add(double(cpu_ns() - cpu_start) / 1e6);
    kept += remap.kept;
    fetched += remap.fetched;
    fetched_most += most_fetched(held, remap, p);
    if (auto s = plan::check_plan(plan); !s) {
      std::fprintf(stderr, "bench_policy: the new plan is invalid: %s\n", s.error().message().c_str());
      return 1;
    }

    start = mono_ns();
    algo::LayerDemand demand{std::vector<int>(a.replicas[0].begin(), a.replicas[0].end()), loads};
    algo::FrontierOptions fo;
    fo.nodes = int(survivors), fo.slots = int(kSlots), fo.floor = int(a.floor);
    const auto frontier = must(algo::placement_frontier({demand}, fo), "frontier");
    t["frontier"].add(ms_since(start));
    frontier_points = frontier.points.size();

    // The same re-plan told what the survivors hold (ctx.current, as the driver tells it): the
    // placement in force, adjusted, is weighed beside the frontier.
    std::vector<std::vector<std::vector<uint32_t>>> current(1);
    for (uint32_t n = 0; n < kNodes; ++n)
      if (alive[n]) current[0].push_back(held[n][0]);
    start = mono_ns();
    const auto pc = pol.place("goodput", survivors, a, loads, std::move(current));
    const double place_current_ms = ms_since(start);
    t["goodput current"].add(place_current_ms);
    start = mono_ns();
    const auto remap_c = must(plan::greedy_remap(held, alive, plan_of(survivors, a, pc)), "greedy_remap");
    t["total current"].add(alloc_ms + place_current_ms + ms_since(start));
    fetched_current += remap_c.fetched;
    fetched_most_current += most_fetched(held, remap_c, pc);

    for (const std::string peer : {"mro", "spread", "compact"}) {
      start = mono_ns();
      const auto q = pol.place(peer, survivors, a, loads);
      t[peer].add(ms_since(start));
      start = mono_ns();
      (void)must(plan::greedy_remap(held, alive, plan_of(survivors, a, q)), "greedy_remap");
      t["remap " + peer].add(ms_since(start));
    }

    algo::LayerPlacement layer{int(kExperts), {}};
    for (const auto& node : p.placement[0]) layer.nodes.emplace_back(node.begin(), node.end());
    for (int k = 1; k <= 4; ++k) {
      start = mono_ns();
      const auto e = must(algo::recovery_probability(layer, k), "recovery");
      recovery[size_t(k)].add(ms_since(start));
      recovery_note[size_t(k)] = std::string(algo::method_name(e.method)) + ", p = " + fmt("%.9f", e.p);
    }
  }

  std::printf("Plan path after one node failure: %u → %u nodes × %u experts × %u slots, f = %u, one layer, "
              "Zipf(1.1) loads; %d runs (ms).\n\n", kNodes, kNodes - 1, kExperts, kSlots, kFloor, runs);
  std::printf("| step | p50 | max | notes |\n| --- | ---: | ---: | --- |\n");
  row("allocation `lazarus` (Lua, Eq. 1)", t["alloc"], "");
  row("placement `goodput`, the default (Lua + sal.frontier)", t["goodput"],
      "a large plan: 5 constructions weighed without placements, the chosen one built");
  row("greedy remap (C++)", t["remap"],
      fmt("%.0f replicas kept", double(kept) / runs) + fmt(", %.0f fetched per run", double(fetched) / runs) +
          fmt(", the busiest node %.1f", double(fetched_most) / runs));
  row("placement `goodput` told what the survivors hold (ctx.current)", t["goodput current"],
      fmt("the placement in force, adjusted, weighed too: %.0f fetched per run", double(fetched_current) / runs) +
          fmt(", the busiest node %.1f", double(fetched_most_current) / runs));
  row("**total: allocation + goodput + remap**", t["total"], "target ≤ 50 ms");
  row("**the same with ctx.current, as the driver asks**", t["total current"], "target ≤ 50 ms");
  row("the same, CPU time of the planning thread", t["total cpu"], "what a busy machine does not stretch");
  row("the frontier alone (C++, algo/frontier.h)", t["frontier"],
      fmt("%.0f candidates (blocks-8 .. blocks-1, balance first), each balanced; target ≤ 50 ms", double(frontier_points)));
  row("peer: placement `mro` (Lua + sal.*)", t["mro"], "blocks fit when E is a multiple of c: no search");
  row("peer: placement `spread` (Lua)", t["spread"], "round robin");
  row("peer: placement `compact` (Lua)", t["compact"], "");
  row("peer: greedy remap of the `mro` plan", t["remap mro"], "");
  row("peer: greedy remap of the `spread` plan", t["remap spread"], "");
  row("peer: greedy remap of the `compact` plan", t["remap compact"], "");
  for (int k = 1; k <= 4; ++k)
    row("exact recovery P(" + std::to_string(k) + ") of the new plan", recovery[size_t(k)],
        recovery_note[size_t(k)] + " (last run; target ≤ 10 ms)");
  return 0;
}
