// bench_skew.cpp — adaptive expert replicas against uniform expert parallelism under skewed loads,
// on the same workers, with real `salamander run` processes.
//
// The job forces a steady routing skew (model.skew: the first `hot` experts of every layer are drawn
// `skew` times as often as the others) and re-plans every 10 steps on the measured loads. Two
// policy pairs train it: allocation = uniform with placement = spread (classic expert parallelism:
// every expert the same number of replicas, whatever its load), lazarus + mro (replicas in
// proportion to load, placed for recovery), and lazarus + spread (the same replicas, dealt round
// robin: separates what allocation and placement each contribute). Rounds alternate the pairs to
// spread machine noise.
// Throughput is tokens over wall time from step 20 to the end (so plan switches count), read from
// each run's metrics.csv; "imbalance" is the busiest worker's expert tokens over the mean (1 = even).
//
// usage: bench_skew [rounds = 3] [steps = 60] [nodes = 4] [skew = 4] [hot = 2] [slots = 4]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/mesh_harness.h"

using namespace sal::test;

namespace {

struct Setup {
  int steps = 60, nodes = 4, hot = 2, slots = 4;
  double skew = 4;
};

struct Row {
  double tokens_per_s = 0, imbalance = 0, step_ms = 0, loss = 0;
};

std::string job_text(const Setup& s, const std::string& alloc, const std::string& place) {
  std::ostringstream o;
  o << "return {\n  name = 'skew-" << alloc << "',\n"
    << "  model = { layers = 2, d_model = 128, heads = 4, experts = 8, top_k = 2, seq_len = 64, skew = " << s.skew
    << ", hot_experts = " << s.hot << " },\n"
    << "  data = { path = '" << docs_dir() << "' },\n"
    << "  train = { steps = " << s.steps << ", batch = 32, rebalance_every = 10 },\n"
    << "  mesh = { nodes = " << s.nodes << " },\n"
    << "  policies = { allocation = '" << alloc << "', placement = '" << place << "', slots = " << s.slots << ", min_replicas = 1 },\n}\n";
  return o.str();
}

// metrics.csv columns: step,loss,ce,aux,grad_norm,lr,tokens,step_ms,compute_ms,tokens_per_s,workers,plan,time_s,imbalance
Row measure(const std::string& run_dir, int from_step) {
  std::ifstream in(run_dir + "/metrics.csv");
  std::string line;
  std::getline(in, line);
  std::vector<std::vector<double>> rows;
  while (std::getline(in, line)) {
    std::vector<double> r;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) r.push_back(std::stod(cell));
    rows.push_back(r);
  }
  Row out;
  if (rows.size() <= size_t(from_step) + 1) return out;
  double tokens = 0, ms = 0, imb = 0;
  for (size_t i = size_t(from_step) + 1; i < rows.size(); ++i) {
    tokens += rows[i][6];
    ms += rows[i][7];
    imb += rows[i][13];
  }
  size_t n = rows.size() - size_t(from_step) - 1;
  out.tokens_per_s = tokens / (rows.back()[12] - rows[size_t(from_step)][12]);
  out.step_ms = ms / double(n);
  out.imbalance = imb / double(n);
  out.loss = rows.back()[1];
  return out;
}

Row run_once(const Setup& s, const std::string& alloc, const std::string& place, int round) {
  std::string dir = temp_dir("skew");
  std::ofstream(dir + "/job.lua") << job_text(s, alloc, place);
  Proc p = spawn({bin(), "run", dir + "/job.lua", "--out", dir + "/out"}, dir + "/run.out");
  int rc = p.wait(600000);
  if (rc != 0) {
    std::fprintf(stderr, "%s + %s round %d failed (exit %d); see %s/run.out\n", alloc.c_str(), place.c_str(), round, rc,
                 dir.c_str());
    return {};
  }
  return measure(dir + "/out", 20);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  Setup s;
  if (argc > 2) s.steps = std::atoi(argv[2]);
  if (argc > 3) s.nodes = std::atoi(argv[3]);
  if (argc > 4) s.skew = std::atof(argv[4]);
  if (argc > 5) s.hot = std::atoi(argv[5]);
  if (argc > 6) s.slots = std::atoi(argv[6]);
  std::printf("skewed expert loads: %d workers, 8 experts x 2 layers, top-2, %d hot experts drawn %.0fx as often,\n"
              "%d slots per worker, re-plan every 10 steps, %d steps (measured from step 20), %d rounds\n\n",
              s.nodes, s.hot, s.skew, s.slots, s.steps, rounds);
  const std::vector<std::pair<std::string, std::string>> pairs = {{"uniform", "spread"}, {"lazarus", "mro"},
                                                                  {"lazarus", "spread"}};
  std::vector<std::vector<Row>> rows(pairs.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < pairs.size(); ++i) {
      rows[i].push_back(run_once(s, pairs[i].first, pairs[i].second, r));
      std::fprintf(stderr, "round %d %s+%s: %.0f tokens/s\n", r, pairs[i].first.c_str(), pairs[i].second.c_str(),
                   rows[i].back().tokens_per_s);
    }
  std::printf("%-18s %14s %16s %12s %11s %10s\n", "policies", "tokens/s (med)", "tokens/s (range)", "step ms",
              "imbalance", "loss");
  std::vector<double> med;
  for (size_t i = 0; i < pairs.size(); ++i) {
    std::vector<double> tps, ms, imb, loss;
    for (const auto& x : rows[i]) {
      tps.push_back(x.tokens_per_s);
      ms.push_back(x.step_ms);
      imb.push_back(x.imbalance);
      loss.push_back(x.loss);
    }
    med.push_back(median(tps));
    char range[64];
    std::snprintf(range, sizeof range, "%.0f-%.0f", *std::min_element(tps.begin(), tps.end()),
                  *std::max_element(tps.begin(), tps.end()));
    std::printf("%-18s %14.0f %16s %12.1f %11.2f %10.3f\n", (pairs[i].first + " + " + pairs[i].second).c_str(), med.back(),
                range, median(ms), median(imb), median(loss));
  }
  if (med[0] > 0)
    for (size_t i = 1; i < pairs.size(); ++i)
      std::printf("%s%s + %s / uniform + spread: %.2fx tokens/s\n", i == 1 ? "\n" : "", pairs[i].first.c_str(),
                  pairs[i].second.c_str(), med[i] / med[0]);
  return 0;
}
