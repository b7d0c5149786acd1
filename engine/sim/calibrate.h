// calibrate.h — the simulator's calibration (`salamander sim fit RUN_DIR`): turns a finished
// `salamander run` into a simulator scenario that replays it — the same cluster, every node loss
// and join at its time (seconds since training began), the step-time model fitted by least squares
// to the run's per-step times at each live-worker count, recovery costs from the recoveries it
// measured, and a horizon equal to its training wall time — so that `salamander sim SCENARIO.lua`
// predicts the samples the run trained. The run's files are read with the report library.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>

#include "core/result.h"

namespace sal::sim {

struct Calibration;  // the fit (calibrate.cpp)

// Fits the run in `dir` (its job file: `job_file`, or the one its workers logged).
Result<std::shared_ptr<const Calibration>> calibrate_run(const std::string& dir, const std::optional<std::string>& job_file);
// The scenario file's text (Lua), with the fit in a comment atop.
std::string calibration_scenario(const Calibration& c);
// The fit as JSON (`sim fit --json`), naming the scenario written to `scenario_path`.
nlohmann::ordered_json calibration_json(const Calibration& c, const std::string& scenario_path);
// The fit in a few lines of text.
std::string calibration_summary(const Calibration& c, const std::string& scenario_path);

}  // namespace sal::sim
