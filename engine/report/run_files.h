// run_files.h — a run directory read into memory: the per-step metrics, the event log, the phase
// timeline, the plans put in force and the summary. Only metrics.csv is required; each other file
// may be missing (its part is then empty), but a malformed line anywhere is an error naming the
// file and line (and column, for CSV).
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::report {

// One row of metrics.csv: one committed step. After a checkpoint restore step numbers go back, so
// the same step may appear twice; rows stay in file (= time) order.
struct StepRow {
  uint64_t step = 0;
  double loss = 0, ce = 0, aux = 0, grad_norm = 0, lr = 0;
  uint64_t tokens = 0;
  double step_ms = 0, compute_ms = 0, tokens_per_s = 0;
  uint64_t workers = 0, plan = 0;
  double time_s = 0, imbalance = 0;
  double val_loss = NAN;  // the validation loss on a step of train.eval_every (an empty field: NaN)
};

// One row of events.csv, with its time on the run's clock (seconds since the controller started).
struct EventRow {
  uint64_t seq = 0;
  int64_t mono_ns = 0;
  int64_t wall_ms = 0;
  std::string kind, node;
  uint64_t epoch = 0;
  std::string detail;
  double time_s = 0;
  bool stopping = false;  // logged after the job's end began (is_stop)
};

// One row of timeline.csv: [start_s, end_s] spent in `phase` (compute, reconfigure, restore, wait, save).
struct Interval {
  double start_s = 0, end_s = 0;
  std::string phase, detail;
};

// One line of plans.jsonl: a plan put in force.
struct PlanRecord {
  uint64_t plan = 0, step = 0;
  double time_s = 0;
  std::vector<std::string> workers;
  std::vector<std::vector<std::vector<int64_t>>> placement;  // [layer][rank][slot] = expert id
  std::vector<std::vector<double>> loads;                    // [layer][expert], may be empty
  // A plan of data-parallel groups (parallel.groups): positions per group (0: down), and the
  // shard stacks' redundancy, per group its hosted and computed types, and the depth.
  std::vector<uint32_t> groups;
  uint32_t redundancy = 0, depth = 0;
  std::vector<std::vector<uint32_t>> hosts, assignment;
};

struct Run {
  std::string dir;
  nlohmann::json summary = nlohmann::json::object();  // {} when summary.json is missing
  std::vector<StepRow> metrics;
  std::vector<EventRow> events;
  std::vector<Interval> timeline;
  std::vector<PlanRecord> plans;

  // Summary fields, absent when missing or of another type.
  std::optional<double> number(const std::string& key) const;
  std::optional<std::string> text(const std::string& key) const;
};

Result<std::vector<StepRow>> read_metrics(const std::string& path);
// `started_mono_ns` puts events on the run's clock; without it the first event is time 0.
Result<std::vector<EventRow>> read_events(const std::string& path, std::optional<int64_t> started_mono_ns);
Result<std::vector<Interval>> read_timeline(const std::string& path);
Result<std::vector<PlanRecord>> read_plans(const std::string& path);

// Reads every file of `dir` that is there; metrics.csv must be.
Result<Run> load_run(const std::string& dir);

// The job's end beginning, not a failure: steps_done (every step committed), stop_requested, and the
// step_aborted of the step in flight when job.stop(), Ctrl-C or a drill's end stopped the job
// ("job stopping: ...").
bool is_stop(const EventRow& e);

// Failures: node_dead, step_aborted (but not a stop's), and node_left / worker_exited unless they
// are part of the job's shutdown (`stopping`) or the worker exited with code 0.
bool is_failure(const EventRow& e);
// A node gone from the job: node_dead, or node_left that is not part of the job's shutdown.
bool is_node_loss(const EventRow& e);

}  // namespace sal::report
