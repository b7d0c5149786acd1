// mode_stats.h — the comparison of recovery modes as an experiment: each mode run several times
// (`salamander run --modes … --repeat N`), every run's efficiency (samples trained per node-second
// the run had: the nodes its trace or drill made available, from the joins and losses in its
// events), and per mode the median and range of samples, efficiency, elapsed time and the engine's
// slowest recovery, with each mode's samples against the baseline's (checkpoint-restart, else the
// first mode) as a median of pairs: the k-th run of a mode against the k-th of the baseline. When
// every run trained the same samples (a drill that stops at a step count: every mode trains the
// same steps), the runs are compared on samples per second instead — a ratio of samples would be
// 1.00 for all.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/run_files.h"

namespace sal::report {

// Node-seconds available to the run: from its first event to its end (summary elapsed_s, else the
// last event), each node counted from its node_joined to its loss (node_dead, or node_left that is
// not the job's own end).
double node_seconds(const Run& run);
// Samples per node-second (nullopt without samples or node-seconds).
std::optional<double> efficiency(const Run& run);

struct Spread {
  double median = 0, min = 0, max = 0;
  size_t n = 0;  // 0: no run had the figure
};
Spread spread(std::vector<double> values);

// What the runs are measured against the baseline on: "samples", or "samples/s" when every run
// trained the same samples.
std::string compared_on(const std::vector<Run>& runs);
// A run's figure of that name (samples, or samples ÷ elapsed_s); nullopt when its summary lacks one.
std::optional<double> compared_figure(const Run& run, const std::string& on);

struct ModeStats {
  std::string mode;
  size_t runs = 0;
  Spread samples, efficiency, elapsed, recovery_max, vs_baseline;
  std::string compared_on = "samples";  // what vs_baseline is a ratio of (compared_on())
};

// Per mode, in the order the modes first appear in `runs` (a run's mode: its summary's "mode").
std::vector<ModeStats> mode_stats(const std::vector<Run>& runs);
// Which mode is the baseline: checkpoint-restart when present, else the first.
std::string baseline_mode(const std::vector<ModeStats>& stats);

nlohmann::ordered_json mode_stats_json(const std::vector<ModeStats>& stats);
// A plain-text table (one row per mode), for the terminal.
std::string mode_stats_text(const std::vector<ModeStats>& stats);

}  // namespace sal::report
