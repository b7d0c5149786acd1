// run_charts.h — the run report's plots of metrics.csv: throughput and live workers against time,
// and the training curves against step (loss with the run's events marked on it, gradient norm,
// learning rate, expert imbalance). Recoveries are labelled spans with their durations on both
// axes (run_marks.h); steps run again after a restore are drawn as points.
#pragma once

#include <functional>
#include <string>

#include "report/run_files.h"
#include "report/svg.h"

namespace sal::report {

// A metrics column against step: a line that breaks where the step number goes back (a restore),
// and the re-executed rows (a step number not above the highest before it) as points.
struct StepCurve {
  Series line, redone;
};
StepCurve step_curve(const std::vector<StepRow>& metrics, const std::function<double(const StepRow&)>& value);

std::string throughput_section(const Run& run);
std::string training_section(const Run& run);

}  // namespace sal::report
