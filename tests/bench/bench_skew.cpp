// bench_skew.cpp — adaptive expert replicas against uniform expert parallelism under skewed loads,
// on the same workers, with real `salamander run` processes (Lazarus Fig. 10a's comparison).
//
// The job forces a steady routing skew (model.skew: the first `hot` experts of every layer are drawn
// `skew` times as often as the others), or replays a recorded trace (--trace, below), and re-plans
// every 10 steps on the measured loads. Four policy pairs train it: allocation = uniform with placement = spread (classic expert parallelism:
// every expert the same number of replicas, whatever its load), lazarus + goodput (the default:
// replicas in proportion to load, and the point of the frontier of balance against survival with
// the highest expected goodput), lazarus + mro (placed for recovery and balanced without giving up
// any of it), and lazarus + spread (the same replicas dealt round robin). Rounds alternate the
// pairs to spread machine noise.
//
// The default setting is one where uniform expert parallelism really is imbalanced: 16 workers of
// 2 expert slots, 8 experts, top-1 routing, expert 0 drawn 9x as often as each other (9/16 of the
// tokens). Uniform gives every expert 4 replicas, so the 4 workers holding expert 0 compute 2.5x
// the mean expert work; a balanced uniform placement would need expert 0 on every worker (16
// slots per worker). Lazarus gives expert 0 18 replicas and the others 2 (the floor f = 2), so every
// replica carries the same tokens, and mro keeps the least replicated experts in pairs of workers
// (the most any placement survives two failures with) while every worker does the same work.
//
// Fair measurement (--cpu-share, on by default where the cgroup v1 cpu controller is writable):
// each worker runs in a CPU cgroup of its own with a quota of (cores x 0.9) / workers CPUs, so 16
// workers on 2 cores behave like 16 slower dedicated cores — the busiest worker sets the pace, as on
// a cluster — instead of time-sharing the cores (where a worker that waits gives its core to the
// busy one, and balance hardly matters).
//
// Throughput is tokens over wall time from step 20 to the end (plan switches count), from each
// run's metrics.csv; "imbalance (steps)" is the busiest worker's expert tokens over the mean (1 =
// even), step by step, averaged (it includes each step's sampling noise: 2048 tokens a step put a
// few per cent on some worker whatever the plan); "sampling floor" is what the last plan would show
// step by step if each step's counts were drawn at random from the loads it was planned for
// (sampling_floor: the noise alone, no drift); "balance (plan)" is the last plan's on the loads it
// was planned for (the window's mean); both split the tokens as the run's dispatcher does (by the
// counts, or evenly); P(1), P(2): the probability that the last plan survives 1 and 2 random node
// failures (every layer).
//
// Real loads (--trace DIR: a recorded expert-load trace, a file or a directory such as SmartMoE's
// rank0/): the job replays it as its routing (model.routing_trace), every step's counts the trace's
// exactly, moving to the next file every --every steps; the model has the trace's experts, and the
// forced skew is off. There is no sampling then, so no sampling floor.
//
// Dispatch: each pair runs with the default train.dispatch = "counts" (each expert's tokens split
// over its replicas by the step's counts); lazarus + goodput and uniform + spread also run with
// "even" (Lazarus's even split), to show what the split by counts adds.
//
// usage: bench_skew [--rounds 3] [--steps 60] [--nodes 16] [--slots 2] [--experts 8] [--top-k 1]
//                   [--skew 9] [--hot 1] [--min-replicas 2] [--d-model 256] [--batch 32]
//                   [--trace DIR] [--every 1] [--cpu-share F | --no-cpu-share]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/expert_split.h"
#include "core/load_trace.h"
#include "core/paths.h"
#include "policy/algo/placement_balance.h"
#include "policy/algo/recovery.h"
#include "report/run_files.h"
#include "support/bench_share.h"
#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

struct Setup {
  int rounds = 3, steps = 60, nodes = 16, slots = 2, experts = 8, top_k = 1, hot = 1, min_replicas = 2;
  int d_model = 256, batch = 32, every = 1;
  double skew = 9, cpu_share = -1;  // -1: (cores x 0.9) / nodes where available; 0: off
  std::string trace;                // a recorded load trace to replay as the routing ("": the forced skew)
};

// One run's policies: allocation, placement, and how the dispatcher splits each expert's tokens.
struct Pair {
  std::string alloc, place, dispatch;
  std::string name() const { return alloc + " + " + place + (dispatch == "counts" ? "" : " (" + dispatch + ")"); }
};

struct Row {
  double tokens_per_s = 0, imbalance = 0, step_ms = 0, loss = 0, p1 = 0, p2 = 0, plan_balance = 0, floor = 0;
  std::vector<algo::LayerPlacement> placement;  // the last plan's, per layer
  std::vector<std::vector<double>> loads;       // the loads it was planned for ([] when kept from the start)
  bool by_counts = true;                        // the run's train.dispatch
};

// One layer's balance on loads as the dispatcher splits them: by the counts (core/expert_split.h),
// or evenly over the replicas (what the placement policies plan for). None: loads that do not fit.
std::optional<double> layer_balance(const algo::LayerPlacement& layer, const std::vector<double>& loads, bool by_counts) {
  if (!by_counts) {
    auto b = algo::placement_imbalance(layer, loads);
    return b ? std::optional<double>(*b) : std::nullopt;
  }
  const SplitTable units = units_of(layer.nodes, loads.size());
  std::vector<uint64_t> totals;
  for (double x : loads) totals.push_back(uint64_t(std::llround(x)));
  return split_imbalance(balanced_split(totals, units, {}), {});
}

// A plan's balance on per-layer loads: the busiest node's work over the mean, averaged over layers.
double balance_of(const std::vector<algo::LayerPlacement>& layers, const std::vector<std::vector<double>>& loads,
                  bool by_counts) {
  double sum = 0;
  for (size_t l = 0; l < layers.size() && l < loads.size(); ++l) sum += layer_balance(layers[l], loads[l], by_counts).value_or(0);
  return layers.empty() || loads.empty() ? 0 : sum / double(layers.size());
}

// The sampling floor of a plan: the step-by-step imbalance it would show if every step's expert
// counts were drawn at random from the loads it was planned for (per layer, `assignments` draws
// with the loads as probabilities: a multinomial, which is exact for top-1 and close for top-k),
// averaged over `draws` such steps. No placement of these replicas does better on average: the
// part of "imbalance (steps)" above "balance (plan)" that this accounts for is sampling, not plan.
double sampling_floor(const std::vector<algo::LayerPlacement>& layers, const std::vector<std::vector<double>>& loads,
                      int assignments, int draws, bool by_counts) {
  std::mt19937_64 rng(12345);
  double sum = 0;
  int n = 0;
  for (int d = 0; d < draws; ++d)
    for (size_t l = 0; l < layers.size() && l < loads.size(); ++l) {
      double total = 0;
      for (double x : loads[l]) total += x;
      if (total <= 0) continue;
      std::vector<double> counts(loads[l].size(), 0.0);
      int left = assignments;
      double rest = total;
      for (size_t e = 0; e < counts.size() && left > 0; ++e) {
        const double p = rest > 0 ? std::min(1.0, loads[l][e] / rest) : 1.0;
        const int c = std::binomial_distribution<int>(left, p)(rng);
        counts[e] = c;
        left -= c;
        rest -= loads[l][e];
      }
      if (auto b = layer_balance(layers[l], counts, by_counts)) {
        sum += *b;
        ++n;
      }
    }
  return n ? sum / n : 0;
}

std::string job_text(const Setup& s, const Pair& pair) {
  std::ostringstream o;
  o << "return {\n  name = 'skew-" << pair.alloc << "',\n"
    << "  model = { layers = 2, d_model = " << s.d_model << ", heads = 4, experts = " << s.experts
    << ", top_k = " << s.top_k << ", seq_len = 64, ";
  if (s.trace.empty())
    o << "skew = " << s.skew << ", hot_experts = " << s.hot << " },\n";
  else
    o << "routing_trace = '" << s.trace << "', routing_every = " << s.every << " },\n";
  o << "  data = { path = '" << docs_dir() << "' },\n"
    << "  train = { steps = " << s.steps << ", batch = " << s.batch << ", rebalance_every = 10, dispatch = '"
    << pair.dispatch << "' },\n"
    // a worker confined to a tenth of a CPU can be throttled past the default 300 ms liveness
    // window while it moves units (seen: one stopped as unresponsive): a 1 s window
    << "  mesh = { nodes = " << s.nodes << ", heartbeat_ms = 100, miss_limit = 10 },\n"
    << "  policies = { allocation = '" << pair.alloc << "', placement = '" << pair.place << "', slots = " << s.slots
    << ", min_replicas = " << s.min_replicas << " },\n}\n";
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

// Of the last plan put in force (plans.jsonl): P(k), every layer surviving the same k failures,
// and its balance on the loads it was planned for (the window's mean: no step's sampling noise).
void last_plan(const std::string& run_dir, Row& row) {
  auto plans = report::read_plans(run_dir + "/plans.jsonl");
  if (!plans || plans->empty()) return;
  const auto& last = plans->back();
  std::vector<algo::LayerPlacement> layers;
  for (const auto& l : last.placement) {
    algo::LayerPlacement lp;
    for (const auto& node : l) {
      lp.nodes.emplace_back(node.begin(), node.end());
      for (auto e : node) lp.experts = std::max(lp.experts, int(e) + 1);
    }
    layers.push_back(std::move(lp));
  }
  int experts = 0;
  for (const auto& l : layers) experts = std::max(experts, l.experts);
  for (auto& l : layers) l.experts = experts;
  if (auto p = algo::joint_recovery_probability(layers, 1)) row.p1 = p->p;
  if (auto p = algo::joint_recovery_probability(layers, 2)) row.p2 = p->p;
  row.placement = layers;
  row.loads = last.loads;
  row.plan_balance = balance_of(layers, last.loads, row.by_counts);
}

Row run_once(const Setup& s, const Pair& pair, int round) {
  std::string dir = temp_dir("skew");
  std::ofstream(dir + "/job.lua") << job_text(s, pair);
  std::vector<std::string> argv{bin(), "run", dir + "/job.lua", "--out", dir + "/out"};
  if (s.cpu_share > 0) argv.insert(argv.end(), {"--cpu-share", std::to_string(s.cpu_share)});
  Proc p = spawn(argv, dir + "/run.out");
  int rc = p.wait(1200000);
  if (rc != 0) {
    std::fprintf(stderr, "%s round %d failed (exit %d); see %s/run.out\n", pair.name().c_str(), round, rc, dir.c_str());
    return {};
  }
  Row r = measure(dir + "/out", 20);
  r.by_counts = pair.dispatch == "counts";
  last_plan(dir + "/out", r);
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: bench_skew [--rounds R] [--steps S] [--nodes N] [--slots C] [--experts E] [--top-k K] "
                       "[--skew X] [--hot H] [--min-replicas F] [--d-model D] [--batch B] [--trace DIR] [--every S] "
                       "[--cpu-share F | --no-cpu-share]\n");
  std::exit(2);
}

// --name value pairs; a bad one ends the program with the usage line.
Setup parse(int argc, char** argv) {
  Setup s;
  std::vector<char*> rest{argv[0]};  // all but --trace DIR, for the numeric options' parser
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--trace") {
      rest.push_back(argv[i]);
      continue;
    }
    if (++i == argc) usage();
    s.trace = absolute_path(argv[i]);
  }
  const std::map<std::string, int*> ints = {
      {"--rounds", &s.rounds}, {"--steps", &s.steps}, {"--nodes", &s.nodes}, {"--slots", &s.slots},
      {"--experts", &s.experts}, {"--top-k", &s.top_k}, {"--hot", &s.hot}, {"--min-replicas", &s.min_replicas},
      {"--d-model", &s.d_model}, {"--batch", &s.batch}, {"--every", &s.every}};
  if (!parse_bench_options(int(rest.size()), rest.data(), ints, {{"--skew", &s.skew}}, s.cpu_share)) usage();
  if (!s.trace.empty()) {  // the model takes the trace's experts
    auto steps = read_load_trace(s.trace);
    if (!steps) {
      std::fprintf(stderr, "--trace: %s\n", steps.error().message().c_str());
      std::exit(2);
    }
    s.experts = int(steps->front().loads[0].size());
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Setup s = parse(argc, argv);
  s.cpu_share = fair_cpu_share(s.cpu_share, s.nodes);
  std::printf("skewed expert loads: %d workers x %d slots, %d experts x 2 layers, top-%d, d %d, batch %d x 64;\n",
              s.nodes, s.slots, s.experts, s.top_k, s.d_model, s.batch);
  if (s.trace.empty())
    std::printf("%d hot expert(s) drawn %.0fx as often;", s.hot, s.skew);
  else
    std::printf("routing replayed from %s (a recorded step every %d steps);", s.trace.c_str(), s.every);
  std::printf(" floor f = %d; re-plan every 10 steps; %d steps (measured from step 20); %d rounds;\n", s.min_replicas,
              s.steps, s.rounds);
  if (s.cpu_share > 0)
    std::printf("each worker in a CPU cgroup of %.3f CPU (%u cores)\n\n", s.cpu_share, std::thread::hardware_concurrency());
  else
    std::printf("workers unconfined (time-sharing the cores)\n\n");
  const std::vector<Pair> pairs = {{"uniform", "spread", "counts"}, {"lazarus", "goodput", "counts"},
                                   {"lazarus", "mro", "counts"},      {"lazarus", "spread", "counts"},
                                   {"lazarus", "goodput", "even"},    {"uniform", "spread", "even"}};
  std::vector<std::vector<Row>> rows(pairs.size());
  for (int r = 0; r < s.rounds; ++r)
    for (size_t i = 0; i < pairs.size(); ++i) {
      rows[i].push_back(run_once(s, pairs[i], r));
      std::fprintf(stderr, "round %d %s: %.0f tokens/s, imbalance %.3f\n", r, pairs[i].name().c_str(),
                   rows[i].back().tokens_per_s, rows[i].back().imbalance);
    }
  // A plan kept from the first step (uniform + spread never changes) was planned without loads:
  // its balance is taken on the loads another run of the same setting planned for.
  std::vector<std::vector<double>> any_loads;
  for (const auto& pair_rows : rows)
    for (const auto& x : pair_rows)
      if (any_loads.empty() && !x.loads.empty()) any_loads = x.loads;
  for (auto& pair_rows : rows)
    for (auto& x : pair_rows)
      if (x.loads.empty()) x.plan_balance = balance_of(x.placement, any_loads, x.by_counts);
  const int assignments = s.batch * 64 * s.top_k;  // a step's expert assignments per layer
  if (s.trace.empty())  // replayed counts are exact: no sampling
    for (auto& pair_rows : rows)
      for (auto& x : pair_rows)
        x.floor = sampling_floor(x.placement, x.loads.empty() ? any_loads : x.loads, assignments, 400, x.by_counts);
  std::printf("| policies | tokens/s (median) | range | step ms | imbalance (steps) | sampling floor | balance (plan) | P(1) | P(2) | loss |\n"
              "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::vector<double> med;
  for (size_t i = 0; i < pairs.size(); ++i) {
    std::vector<double> tps, ms, imb, loss, p1, p2, plan, floor;
    for (const auto& x : rows[i]) {
      tps.push_back(x.tokens_per_s);
      ms.push_back(x.step_ms);
      imb.push_back(x.imbalance);
      loss.push_back(x.loss);
      p1.push_back(x.p1);
      p2.push_back(x.p2);
      plan.push_back(x.plan_balance);
      floor.push_back(x.floor);
    }
    med.push_back(median(tps));
    std::printf("| %s | %.0f | %.0f-%.0f | %.1f | %.3f | %.3f | %.3f | %.4f | %.4f | %.3f |\n", pairs[i].name().c_str(),
                med.back(), *std::min_element(tps.begin(), tps.end()),
                *std::max_element(tps.begin(), tps.end()), median(ms), median(imb), median(floor), median(plan),
                median(p1), median(p2), median(loss));
  }
  if (med[0] > 0)
    for (size_t i = 1; i < pairs.size(); ++i)
      std::printf("%s%s / uniform + spread: %.2fx tokens/s\n", i == 1 ? "\n" : "", pairs[i].name().c_str(),
                  med[i] / med[0]);
  return 0;
}
