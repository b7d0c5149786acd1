// trial.h — one simulated job: a strategy, a checkpoint model and the cluster's nodes on the event
// core. Nodes fail and return by the scenario's failure source (each node draws from its own
// generator, seeded by the trial and the node, so every strategy of a trial sees the same failure
// times until its own restores change who is up); the job runs steps, checkpoints, pauses for
// recoveries and restores, and stops when the scenario's goal or horizon is reached.
//
// Accounting: a step's time is "useful" when the step is committed and never rolled back; ETTR is
// useful time over wall time; availability is the share of wall time spent running steps (kept or
// not); goodput is samples per second over time of the commits that are kept (a rollback takes
// back the newest commits, at the times they were made: sim/run.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "sim/scenario.h"

namespace sal::sim {

struct FailureRecord {
  double t = 0;
  uint32_t node = 0;
  std::string outcome;      // ignored | masked | reconfigured | restored | waiting
  int failures_absorbed = -1;  // Salamander: failures the placement in force has taken, this one included
  double p_survive = -1;    // exact P(the placement survives this failure | it survived the earlier ones)
};

struct TrialResult {
  bool finished = false;    // reached the goal before the horizon
  std::string checkpoint;   // the checkpoint model as chosen ("oracle every 61 (3.62 s)", "moetion W=8")
  double wall_s = 0;        // job completion time (or the horizon)
  int64_t steps = 0;        // committed steps kept
  double samples = 0;
  int64_t lost_steps = 0;   // committed, then rolled back
  double useful_s = 0, running_s = 0, paused_s = 0, waiting_s = 0, checkpoint_s = 0;
  double ettr = 0, availability = 0;
  int failures = 0, joins = 0, masked = 0, reconfigurations = 0, restores = 0, rebalances = 0;
  uint64_t plans = 0;
  double plan_wall_s = 0;   // measured time of the real policy calls
  uint64_t events = 0;
  std::vector<std::pair<double, double>> samples_log;  // (time, samples committed (+) or rolled back (−))
  std::vector<std::pair<double, double>> live_log;     // (time, nodes up from then on)
  std::vector<FailureRecord> failure_log;
};

struct TrialOptions {
  int trial = 0;
  const std::atomic<bool>* cancel = nullptr;
};

class Strategy;
class Workload;

// Runs strategy `index` of `s` once.
Result<TrialResult> run_trial(const Scenario& s, size_t index, const TrialOptions& o);
// The same with a workload and a strategy made once for many trials (start() resets a strategy;
// what its policies keep between decisions carries over, as it would in a live job).
Result<TrialResult> run_trial(const Scenario& s, size_t index, const Workload& w, Strategy& st, const TrialOptions& o);

}  // namespace sal::sim
