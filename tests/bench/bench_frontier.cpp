// bench_frontier.cpp — placement on real expert loads (issue 35; docs/placement.md): on every file
// of a recorded trace (the SmartMoE rank0 counts in ../shared/data by default: 101 iterations, 24
// layers of 32 experts), for 16 x 8 and 8 x 8 (nodes x slots, f = 2, allocation lazarus):
//   - the most balanced point of the frontier with P(1) = 1, its median per-layer balance;
//   - the default placement's (goodput) choice: its point, median balance and P(2);
//   - mro (the maximum-survival end): median balance and P(2);
//   - the lowest median balance the replicas allow (an expert on at most min(r_e, N) nodes puts
//     t_e / min(r_e, N) on one of them);
// then a summary per shape, and, on the last file, the comparison of allocation +
// placement pairs (per-layer balance min / median / max, P(1), P(2); P(k): every layer together).
// Balance: the busiest node's expert work over the mean, each expert's tokens split evenly over its
// replicas (what the placements plan for); "by counts": the default's choice as the dispatcher
// splits the tokens by the step's counts (train.dispatch = "counts", the default). The loads of a
// layer: the sum of the file's four micro-batches.
//
// usage: bench_frontier [TRACE_DIR] [--every K]   (K: every K-th file, default 1)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/trace_plans.h"

using namespace sal;
using namespace sal::test;

namespace {

constexpr uint32_t kFloor = 2;
constexpr double kTarget = 1.15;  // the median per-layer balance

struct Shape {
  uint32_t nodes, slots;
};

std::string p_text(const std::vector<double>& p, size_t k) { return k < p.size() ? std::to_string(p[k]).substr(0, 6) : "-"; }

void per_file(policy::PolicySet& set, const std::vector<std::string>& files, Shape s, std::vector<TraceFigures>& out) {
  std::printf("\n### %u nodes x %u slots (f = %u, allocation lazarus)\n\n", s.nodes, s.slots, kFloor);
  std::printf("| iteration | frontier point, P(1) = 1 | median | default's choice | median | by counts | P(2) | mro median "
              "| mro P(2) | bound | frontier ms |\n| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& file : files) {
    auto f = trace_figures(set, file, s.nodes, s.slots, kFloor);
    if (!f) {
      std::fprintf(stderr, "bench_frontier: %s\n", f.error().message().c_str());
      std::exit(1);
    }
    std::printf("| %llu | %s | %.3f | %s | %.3f | %.3f | %s | %.3f | %s | %.3f | %.1f |\n", (unsigned long long)f->iteration,
                f->best.name.c_str(), f->best.median, f->chosen.name.c_str(), f->chosen.median, f->chosen_by_counts,
                p_text(f->chosen.p, 1).c_str(), f->mro.median, p_text(f->mro.p, 1).c_str(), f->bound, f->frontier_ms);
    out.push_back(*f);
  }
}

struct Range {
  double lo = 1e300, hi = -1e300;
  void add(double x) { lo = std::min(lo, x), hi = std::max(hi, x); }
};

void summary(Shape s, const std::vector<TraceFigures>& rows) {
  Range best, chosen, counts, chosen_p2, mro, mro_p2, bound, ms;
  int met = 0, chosen_met = 0, counts_met = 0, p1 = 0;
  for (const auto& r : rows) {
    best.add(r.best.median), chosen.add(r.chosen.median), chosen_p2.add(r.chosen.p[1]), counts.add(r.chosen_by_counts);
    counts_met += r.chosen_by_counts <= kTarget && r.chosen.p[0] == 1.0;
    mro.add(r.mro.median), mro_p2.add(r.mro.p[1]), bound.add(r.bound), ms.add(r.frontier_ms);
    met += r.best.median <= kTarget;
    chosen_met += r.chosen.median <= kTarget && r.chosen.p[0] == 1.0;
    p1 += r.chosen.p[0] == 1.0;
  }
  std::printf("| %u x %u | %zu | %d | %.3f-%.3f | %d | %.3f-%.3f | %d | %.3f-%.3f | %.4f-%.4f | %d | %.3f-%.3f | %.4f-%.4f | %.3f-%.3f | %.0f-%.0f |\n",
              s.nodes, s.slots, rows.size(), met, best.lo, best.hi, chosen_met, chosen.lo, chosen.hi, counts_met, counts.lo,
              counts.hi, chosen_p2.lo,
              chosen_p2.hi, p1, mro.lo, mro.hi, mro_p2.lo, mro_p2.hi, bound.lo, bound.hi, ms.lo, ms.hi);
}

void pairs(policy::PolicySet& set, const std::string& file, Shape s) {
  std::printf("\n### %s, %u nodes x %u slots: allocation + placement pairs\n\n", file.c_str(), s.nodes, s.slots);
  std::printf("| allocation + placement | min | median | max | P(1) | P(2) |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
  const std::pair<const char*, const char*> list[] = {{"lazarus", "goodput"}, {"lazarus", "mro"}, {"lazarus", "spread"},
                                                      {"eplb", "spread"}, {"eplb", "goodput"}, {"uniform", "spread"}};
  for (auto [a, p] : list) {
    auto f = pair_figures(set, file, s.nodes, s.slots, kFloor, a, p);
    if (!f) {
      std::printf("| %s + %s | %s |\n", a, p, f.error().message().c_str());
      continue;
    }
    std::printf("| %s | %.3f | %.3f | %.3f | %.4f | %.4f |\n", f->name.c_str(), f->min, f->median, f->max, f->p[0], f->p[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = smartmoe_rank0_dir();
  size_t every = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--every") == 0 && i + 1 < argc) {
      every = size_t(std::max(1, std::atoi(argv[++i])));
    } else {
      dir = argv[i];
    }
  }
  std::vector<std::string> files;
  const auto all = trace_files(dir);
  for (size_t i = 0; i < all.size(); i += every) files.push_back(all[i]);
  if (files.empty()) {
    std::printf("skipped: no trace files (*.log) in %s\n", dir.c_str());
    return 0;
  }
  std::printf("Placement on %zu trace files of %s; target: a frontier point with P(1) = 1 and median per-layer "
              "balance <= %.2f\n", files.size(), dir.c_str(), kTarget);
  policy::PolicySet set(trace_policy_options());
  const Shape shapes[] = {{16, 8}, {8, 8}};
  std::vector<std::vector<TraceFigures>> rows(2);
  for (size_t i = 0; i < 2; ++i) per_file(set, files, shapes[i], rows[i]);
  std::printf("\n### Summary over the files\n\n| shape | files | frontier point P(1) = 1, median <= %.2f | its median "
              "(range) | default's choice: P(1) = 1, median <= %.2f | its median | by counts: P(1) = 1, median <= %.2f "
              "| its median by counts | its P(2) | its P(1) = 1 | mro median | mro P(2) | bound | frontier ms |\n"
              "| --- | ---: | ---: | --- | ---: | --- | ---: | --- | --- | ---: | --- | --- | --- | --- |\n",
              kTarget, kTarget, kTarget);
  for (size_t i = 0; i < 2; ++i) summary(shapes[i], rows[i]);
  pairs(set, files.back(), shapes[0]);
  return 0;
}
