// run_files.h — a tiny job to run, and reading what a `salamander run` leaves behind, for
// integration tests: its --json summary, metrics.csv columns, events.csv rows, log text, and the
// distance between two checkpoints' weights.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "report/run_files.h"

namespace sal::test {

// A job file <dir>/<name>.lua with a tiny model on the repo's docs (steps take milliseconds).
std::string tiny_job(const std::string& dir, const std::string& name);

// Runs `args` (a `salamander run ... --json`), REQUIREs exit code `rc`, returns the summary object.
nlohmann::json run_json(const std::vector<std::string>& args, const std::string& log, int timeout_ms, int rc = 0);

// One column of <run>/metrics.csv ("step", "loss", "workers", ...), one entry per committed step
// (throws if the file or the column is missing).
std::vector<double> metrics_column(const std::string& run_dir, const std::string& column);
// metrics.csv's validation losses: step -> loss, on the steps that have one.
std::map<uint64_t, double> validation_losses(const std::string& run_dir);

// <run>/events.csv, read by the report's reader (throws if it cannot be read).
std::vector<report::EventRow> events(const std::string& run_dir);

std::string file_text(const std::string& path);  // throws if it cannot be read
// How many times `what` occurs in `text` (overlaps counted).
size_t occurrences(const std::string& text, const std::string& what);
// Every *.log file of a run directory, concatenated.
std::string run_logs(const std::string& run_dir);

// One unit's weights against another's: |a - b| / |a| and the largest elementwise difference, both
// infinite where either holds a NaN or an infinity (a NaN matches nothing, itself included).
// Throws if the sizes differ.
struct UnitDistance {
  double relative = 0, elementwise = 0;
};
UnitDistance unit_distance(const std::vector<float>& a, const std::vector<float>& b);

// Per unit, the distance between two checkpoints' weight vectors relative to their size (the
// largest), and the largest elementwise difference (unit_distance: infinite for a NaN or an
// infinity). Fails (throws) if their units differ.
struct WeightDistance {
  double relative = 0, elementwise = 0;
  double median_relative = 0;  // the middle unit's relative distance
  size_t units = 0;
};
WeightDistance weight_distance(const std::string& checkpoint_a, const std::string& checkpoint_b);

}  // namespace sal::test
