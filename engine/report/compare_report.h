// compare_report.h — several runs of one job side by side (e.g. one drill under the three recovery
// modes, each maybe several times): a table of outcomes with each run's samples (or samples per
// second, when every run trained the same samples) relative to a baseline and per node-second it had, per mode the medians and ranges (mode_stats.h) when a mode
// ran more than once, samples trained, throughput and live workers over time, and training progress
// (samples) over time.
#pragma once

#include <string>
#include <vector>

#include "report/run_files.h"

namespace sal::report {

// The run the others are measured against: the first whose mode is "checkpoint-restart", else the first.
size_t baseline_index(const std::vector<Run>& runs);

// A label per run: its summary mode, or its directory name; repeated labels get the directory appended.
std::vector<std::string> run_labels(const std::vector<Run>& runs);

// Samples trained by `time_s` of each metrics row: the rows that reached a new highest step
// (re-executed steps are not counted again) times samples per step (summary samples ÷ steps, or 1).
std::vector<double> cumulative_samples(const Run& run);

std::string comparison_html(const std::vector<Run>& runs);

}  // namespace sal::report
