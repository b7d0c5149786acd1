// bench_sim.cpp — the discrete-event simulator's speed on whole scenarios (sim::run_simulation, the
// path `salamander sim` takes), against issue 6's target: "10^4 steps × 1000 groups × 10 trials of
// the SPARe scenario in ≤ 2 s". Rows:
//   SPARe scenario   1000 data-parallel groups, r = r* (⌊log₂ N + 0.833⌋ = 10), 10^4 steps, 10 trials,
//                    Weibull (k = 0.78) group failures, 3600 s restarts with a spare pool; the spare
//                    strategy (real redundancy policy + reordering controller at every failure) and,
//                    as its peer, checkpoint-only on the same failures.
//   16 384 GPUs      2048 nodes × 8 GPUs × 2 slots, 256 experts top-8, 2 layers, 100 random node
//                    faults spread over the run; Salamander re-plans with the real lazarus + mro
//                    policies and the greedy remap at every failure. Peer: the same without the exact
//                    recovery probability at each failure (report.recovery_probability = false).
// Prints a markdown table: the outcome (steps, JCT, failures and what they became), events, plans, mean plan ms (measured policy calls), wall time, events/s.
//
// usage: bench_sim [trials = 10]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "sim/run.h"
#include "sim/scenario.h"

using namespace sal;
using json = nlohmann::json;

namespace {

struct Row {
  std::string name, target;
  json spec;
};

// The SPARe scenario with one strategy.
json spare_scenario(int trials, const json& strategy) {
  return {{"name", "spare-1000"},
          {"trials", trials},
          {"seed", 1},
          {"cluster", {{"nodes", 1000}}},
          // A group fails about every 116 days (Weibull k = 0.78): the job sees a failure every ~2.8 h.
          {"failures", {{"law", "weibull"}, {"shape", 0.78}, {"mtbf_s", 1e7}, {"spares", true}}},
          {"step", {{"shard_s", 6}, {"allreduce_alpha_s", 0.05}, {"dense_state_bytes", 2.4e11}}},
          {"costs", {{"restart_s", 3600}}},
          {"strategies", {strategy}},
          {"stop", {{"steps", 10000}}},
          {"report", {{"recovery_probability", false}}}};
}

// 16 384 GPUs, 100 random single-node faults, every 50 s from t = 25 s (steps take ~5 s).
json salamander_scenario(bool recovery_probability) {
  json faults = json::array();
  for (int i = 0; i < 100; ++i) faults.push_back({{"at_s", 25 + 50 * i}, {"count", 1}});
  return {{"name", "salamander-16k"},
          {"trials", 1},
          {"seed", 1},
          {"cluster", {{"nodes", 2048}, {"gpus_per_node", 8}, {"slots_per_gpu", 2}}},
          {"failures", {{"faults", faults}}},
          {"workload", {{"layers", 2}, {"layer_weight", 29}, {"experts", 256}, {"top_k", 8},
                        {"tokens_per_step", 16777216}, {"samples_per_step", 4096}, {"loads", {{"kind", "zipf"}, {"s", 0.8}}}}},
          {"step", {{"dense_s_per_token", 4e-4}, {"expert_s_per_token", 1e-6}, {"alltoall_alpha_s", 1e-4},
                    {"alltoall_s_per_byte", 2e-11}, {"token_bytes", 14336}, {"allreduce_alpha_s", 5e-3},
                    {"allreduce_s_per_byte", 1e-11}, {"dense_grad_bytes", 4e10}, {"expert_state_bytes", 5.3e8},
                    {"dense_state_bytes", 2.4e11}, {"p2p_Bps", 25e9}}},
          {"costs", {{"detect_s", 0.3}, {"plan_s", 0.1}, {"rebuild_s", 5}, {"restart_s", 300}}},
          {"strategies", {{{"kind", "salamander"}, {"min_replicas", 2}}}},
          {"stop", {{"steps", 1200}}},
          {"report", {{"recovery_probability", recovery_probability}}}};
}

}  // namespace

int main(int argc, char** argv) {
  int trials = argc > 1 ? std::atoi(argv[1]) : 10;
  if (trials < 1) {
    std::fprintf(stderr, "usage: bench_sim [trials = 10]\n");
    return 2;
  }
  (void)log::init({.level = "warn"});  // policy loads log at info, once per strategy and point

  Row rows[] = {
      {"SPARe 1000 groups, r*, spare", "<= 2 s", spare_scenario(trials, {{"kind", "spare"}})},
      {"SPARe 1000 groups, checkpoint-only", "<= 2 s", spare_scenario(trials, {{"kind", "checkpoint-only"}})},
      {"16384 GPUs, salamander, 100 faults", "-", salamander_scenario(true)},
      {"  same, no recovery probability", "-", salamander_scenario(false)},
  };

  std::printf("| scenario | trials | steps | JCT s | failures | masked | reconf | restores | events | plans | plan ms | wall s | events/s | target |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (auto& row : rows) {
    auto f = sim::scenario_file_from_json(row.spec, "bench_sim", ".");
    if (!f) {
      std::fprintf(stderr, "bench_sim: %s: %s\n", row.name.c_str(), f.error().message().c_str());
      return 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto r = sim::run_simulation(*f);
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r) {
      std::fprintf(stderr, "bench_sim: %s: %s\n", row.name.c_str(), r.error().message().c_str());
      return 1;
    }
    const auto& s = r->points.front().strategies.front();
    std::string target = row.target;
    if (target == "<= 2 s") {
      target += wall <= 2.0 ? " (met)" : " (missed)";
    }
    std::printf("| %s | %d | %.0f | %.0f | %.1f | %.1f | %.1f | %.2f | %llu | %.0f | %.2f | %.3f | %.3g | %s |\n",
                row.name.c_str(), s.trials, s.steps.mean, s.jct_s.mean, s.failures.mean, s.masked.mean, s.reconfigurations.mean,
                s.restores.mean, (unsigned long long)r->events, s.plans.mean * s.trials, s.plan_ms.mean, wall,
                double(r->events) / wall, target.c_str());
    std::fflush(stdout);
  }
  return 0;
}
