// run.h — a whole simulation: every sweep point × strategy × trial of a scenario file, averaged,
// with progress reported as it goes and a cancel flag honoured between trials; and its outputs —
// JSON (`--json`, `sim.result()`) and the text table (rows: sweep points; columns: strategies; cells:
// the scenario's metric, normalised to one strategy when asked).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "sim/trial.h"
#include "sim/scenario.h"

namespace sal::sim {

struct Stat {
  double mean = 0, se = 0;   // over trials; se = standard error of the mean
};

// Recovery probability at the failures of a Salamander strategy, by failures absorbed (k).
struct RecoveryPoint {
  int k = 0;
  uint64_t failures = 0;      // failures that were the k-th a placement took
  double predicted = 0;       // mean exact P(survive the k-th | survived the first k − 1)
  double observed = 0;        // share of them the placement survived (no restore)
};

struct StrategySummary {
  std::string label, kind, checkpoint;
  int trials = 0, finished = 0;
  Stat jct_s, samples, steps, lost_steps, ettr, availability, failures, masked, reconfigurations, restores,
      plans, plan_ms;
  double bucket_s = 0;
  std::vector<double> goodput;      // mean samples/s per bucket over trials, of the commits kept (never below 0)
  std::vector<double> live_nodes;   // mean nodes up per bucket
  std::vector<RecoveryPoint> recovery;
};

struct PointResult {
  std::vector<std::pair<std::string, nlohmann::json>> params;  // the sweep values of this point
  std::vector<StrategySummary> strategies;
};

struct SimResult {
  std::string name, source, metric, normalise_to;
  int trials = 0;
  uint64_t seed = 0;
  std::vector<PointResult> points;
  uint64_t events = 0;
  double wall_s = 0;
};

struct Progress {
  size_t done = 0, total = 0;   // trial runs (points × strategies × trials)
  uint64_t events = 0;
  double elapsed_s = 0;
  std::string current;          // "point 2/5, salamander, trial 3"
};

struct RunOptions {
  int trials = 0;               // > 0: overrides the scenario's
  int64_t seed = -1;            // ≥ 0: overrides the scenario's
  std::function<void(const Progress&)> progress;  // called after every trial run
  const std::atomic<bool>* cancel = nullptr;
};

Result<SimResult> run_simulation(const ScenarioFile& f, const RunOptions& o = {});

// A metric of a summary by name (jct_s, samples, steps, ettr, availability, restores, ...).
Result<Stat> metric_of(const StrategySummary& s, const std::string& metric);
const std::vector<std::string>& metric_names();

nlohmann::ordered_json result_json(const SimResult& r);
std::string result_table(const SimResult& r);

}  // namespace sal::sim
