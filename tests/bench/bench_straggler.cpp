// bench_straggler.cpp — what one slow worker costs a job of 8, with the health policy `ignore`
// (lockstep: every step waits for it) and the default `lighten` (it gets less of each step's work
// until it keeps up), beside a fault-free run: real `salamander run` processes, each worker in a
// CPU cgroup (fair cores), node 3's cut to `factor` of its share at step `at` by a drill's slow{}
// for `for_s` seconds, then given back.
//
// Per trial, from the run's metrics.csv and events.csv:
//   tokens/s     over steps [at + 30, at + 80) (the slowdown in force, the policy settled), or to
//                the step where the share came back if that is sooner (said)
//   named        steps from the cut to the speed watch naming node 3's worker slow
//   back         steps from the share's return to the worker's work back to an even share
//                (lighten: its work_shares event "shares: even"; the watch's node_speed_back too)
// Trials alternate the modes. Fair measurement (--cpu-share, on by default where the cgroup v1 cpu
// controller is writable): each worker in a CPU cgroup of (cores x 0.9) / 8 CPUs.
//
// usage: bench_straggler [--trials 1] [--at 20] [--for-s 90] [--steps 150] [--d-model 192]
//                        [--batch 64] [--factor 0.5] [--cpu-share F | --no-cpu-share]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "report/run_files.h"
#include "support/bench_share.h"
#include "support/bench_table.h"
#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

constexpr int kNodes = 8;
constexpr int kSlowNode = 3;
constexpr int kSettleSteps = 30, kWindowSteps = 50;

struct Setup {
  int trials = 1, at = 20, for_s = 90, steps = 150, d_model = 192, batch = 64;
  double factor = 0.5;
  double cpu_share = -1;  // -1: (cores x 0.9) / nodes where available; 0: off
};

struct Trial {
  double tokens_per_s = 0;
  int window_end = 0;                        // the window's last step + 1
  std::optional<int64_t> named, even, back;  // steps after the cut / after the share's return
  bool ok = false;
};

std::string job_text(const Setup& s, const std::string& health) {
  return "return {\n  name = 'bench-straggler',\n"
         "  model = { layers = 2, d_model = " + std::to_string(s.d_model) + ", heads = 4, experts = 8, top_k = 2, "
         "seq_len = 64 },\n  data = { path = '" SAL_SOURCE_DIR "/docs' },\n"
         "  train = { steps = 100000, batch = " + std::to_string(s.batch) +
         ", lr = 1e-2, warmup = 5, rebalance_every = 0, checkpoint_every = 0 },\n"
         "  mesh = { nodes = " + std::to_string(kNodes) + " },\n"
         "  policies = { slots = 4, health = '" + health + "' },\n}\n";
}

// "... (at step 27)" -> 27
std::optional<int64_t> step_said(const std::string& detail) {
  std::smatch m;
  static const std::regex at("at step (\\d+)\\)");
  if (std::regex_search(detail, m, at)) return std::stoll(m[1]);
  return std::nullopt;
}

// The last step committed at or before time t.
int64_t step_at(const report::Run& run, double t) {
  int64_t step = 0;
  for (const auto& m : run.metrics)
    if (m.time_s <= t) step = int64_t(m.step);
  return step;
}

double rate(const report::Run& run, int from, int to) {
  double t0 = 0, t1 = 0;
  uint64_t tokens = 0;
  for (const auto& m : run.metrics) {
    if (int(m.step) == from) t0 = m.time_s;
    if (int(m.step) > from && int(m.step) < to) tokens += m.tokens, t1 = m.time_s;
  }
  return t1 > t0 ? double(tokens) / (t1 - t0) : 0;
}

// What the events say of node 3: cut at, given back at, named slow, back to even.
void read_events(const report::Run& run, const Setup& s, Trial& t) {
  std::optional<int64_t> cut, restored;
  const std::string node = std::to_string(kSlowNode);
  for (const auto& e : run.events) {
    if (e.kind == "node_slowed") cut = step_said(e.detail);
    if (e.kind == "node_speed_restored") restored = step_said(e.detail);
    if (e.kind == "node_slow" && e.node == node && cut && !t.named) t.named = *step_said(e.detail) - *cut;
    if (e.kind == "node_speed_back" && e.node == node && restored && !t.back) t.back = *step_said(e.detail) - *restored;
    if (e.kind == "work_shares" && restored && !t.even && e.detail.find("(shares: even)") != std::string::npos)
      t.even = step_at(run, e.time_s) - *restored;
  }
  t.window_end = s.at + kSettleSteps + kWindowSteps;
  if (restored) t.window_end = std::min<int>(t.window_end, int(*restored));
}

Trial run_once(const Setup& s, const std::string& mode) {
  std::string dir = temp_dir("straggler");
  const bool slowed = mode != "fault-free";
  std::ofstream(dir + "/job.lua") << job_text(s, slowed ? mode : "lighten");
  std::ofstream(dir + "/drill.lua") << "drill{ name = 'straggler', steps = " << s.steps << ", seed = 1 }\n"
                                    << "slow{ node = " << kSlowNode << ", step = " << s.at << ", factor = " << s.factor
                                    << ", for_s = " << s.for_s << " }\n";
  std::vector<std::string> argv{bin(), "run", dir + "/job.lua", "--out", dir + "/out"};
  if (slowed) argv.insert(argv.end(), {"--drill", dir + "/drill.lua"});
  else argv.insert(argv.end(), {"--steps", std::to_string(s.steps)});
  if (s.cpu_share > 0) argv.insert(argv.end(), {"--cpu-share", std::to_string(s.cpu_share)});
  Trial t;
  Proc p = spawn(argv, dir + "/run.out");
  int rc = p.wait(1800000);
  auto run = report::load_run(dir + "/out");
  if (rc != 0 || !run) {
    std::fprintf(stderr, "%s: the run failed (exit %d); see %s/run.out\n", mode.c_str(), rc, dir.c_str());
    return t;
  }
  read_events(*run, s, t);
  t.tokens_per_s = rate(*run, s.at + kSettleSteps, t.window_end);
  t.ok = t.tokens_per_s > 0;
  return t;
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: bench_straggler [--trials N] [--at STEP] [--for-s S] [--steps S] [--d-model D] "
                       "[--batch B] [--factor F] [--cpu-share F | --no-cpu-share]\n");
  std::exit(2);
}

Setup parse(int argc, char** argv) {
  Setup s;
  const std::map<std::string, int*> ints = {{"--trials", &s.trials}, {"--at", &s.at},           {"--for-s", &s.for_s},
                                            {"--steps", &s.steps},   {"--d-model", &s.d_model}, {"--batch", &s.batch}};
  if (!parse_bench_options(argc, argv, ints, {{"--factor", &s.factor}}, s.cpu_share)) usage();
  if (s.at < 5 || s.steps < s.at + kSettleSteps + 10 || s.factor <= 0 || s.factor >= 1) usage();
  return s;
}

std::string steps_text(const std::vector<Trial>& v, std::optional<int64_t> Trial::*f) {
  std::string out;
  for (const Trial& t : v) out += (out.empty() ? "" : ", ") + (t.*f ? std::to_string(*(t.*f)) : std::string("—"));
  return out.empty() ? "—" : out;
}

}  // namespace

int main(int argc, char** argv) {
  Setup s = parse(argc, argv);
  s.cpu_share = fair_cpu_share(s.cpu_share, kNodes);
  std::printf("one slow worker: %d workers, d %d, 2 layers, 8 experts, batch %d x 64; node %d at %.0f %% of its share "
              "from step %d for %d s; tokens/s over steps [%d, %d); %d trial(s) per mode\n",
              kNodes, s.d_model, s.batch, kSlowNode, s.factor * 100, s.at, s.for_s, s.at + kSettleSteps,
              s.at + kSettleSteps + kWindowSteps, s.trials);
  if (s.cpu_share > 0)
    std::printf("each worker in a CPU cgroup of %.3f CPU (%u cores)\n\n", s.cpu_share, std::thread::hardware_concurrency());
  else
    std::printf("workers unconfined (time-sharing the cores)\n\n");
  const char* modes[] = {"fault-free", "ignore", "lighten"};
  std::map<std::string, std::vector<Trial>> got;
  for (int i = 0; i < s.trials; ++i)
    for (const char* m : modes)
      if (Trial t = run_once(s, m); t.ok) got[m].push_back(t);
  std::vector<double> free;
  for (const Trial& t : got["fault-free"]) free.push_back(t.tokens_per_s);
  const double base = free.empty() ? 0 : percentile(free, 0.5);
  std::printf("| health policy | tokens/s p50 | vs fault-free | window ends | named slow after (steps) | "
              "even share after its return (steps) | watch says back after (steps) |\n"
              "| --- | ---: | ---: | ---: | --- | --- | --- |\n");
  for (const char* m : modes) {
    const auto& v = got[m];
    if (v.empty()) {
      std::printf("| %s | — | — | — | — | — | — |\n", m);
      continue;
    }
    std::vector<double> r;
    int end = 0;
    for (const Trial& t : v) r.push_back(t.tokens_per_s), end = std::max(end, t.window_end);
    const double p50 = percentile(r, 0.5);
    std::printf("| %s | %.0f | %s | %d | %s | %s | %s |\n", m, p50,
                base > 0 ? (std::to_string(int(std::lround((p50 / base - 1) * 100))) + " %").c_str() : "—", end,
                steps_text(v, &Trial::named).c_str(), steps_text(v, &Trial::even).c_str(), steps_text(v, &Trial::back).c_str());
  }
  return 0;
}
