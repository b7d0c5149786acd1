// jobs.h — simulations started from the REPL (`sim.run{...}`), each on its own thread so the
// controller's loop never waits for one. A job runs sim::run_simulation over a scenario already
// read and checked; its progress (trial runs done of the total, events, the run in progress) is
// kept under the job's mutex by the simulation thread and read by the loop as a snapshot
// (SimJobView). The set of jobs is under a mutex of its own, so REPL sessions may call in from their
// evaluation threads. Nothing here touches the controller: the simulation thread only ever writes its
// own job's fields, blocks asynchronous signals (the loop handles them) and runs at a lower CPU
// priority than the loop, so heartbeats keep their timing while a simulation is busy.
//
// At most kMaxRunning jobs run at once; the last kKeepFinished finished jobs are kept for
// sim.status() and sim.result(). The destructor cancels every running job and joins its thread
// (sim::run_simulation and its trials watch the cancel flag, so this is prompt).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "sim/run.h"
#include "sim/scenario.h"

namespace sal::sim {

enum class SimJobState { running, done, failed, cancelled };
const char* sim_job_state_name(SimJobState s);

// One job at one moment.
struct SimJobView {
  uint64_t id = 0;
  std::string name;          // the scenario's name ("" when it has none)
  std::string source;        // the scenario file, or "<repl>"
  SimJobState state = SimJobState::running;
  size_t done = 0, total = 0;  // trial runs (points x strategies x trials)
  uint64_t events = 0;
  double elapsed_s = 0;
  double eta_s = -1;         // < 0: not known yet (no trial run finished)
  std::string current;       // the last trial run reported: "point 2/5, salamander, trial 3"
  std::string error;         // why it failed
  bool cancel_requested = false;
  // "sim 3: 12/40 trial runs, 1.2 M events, 3.4 s, ETA 8 s"
  std::string line() const;
};

// What a job runs: a scenario file as read, and the run's overrides.
struct SimJobSpec {
  ScenarioFile file;
  int trials = 0;      // > 0: overrides the scenario's
  int64_t seed = -1;   // >= 0: overrides the scenario's
};

class SimJobs {
 public:
  static constexpr size_t kMaxRunning = 2;
  static constexpr size_t kKeepFinished = 16;

  SimJobs();
  ~SimJobs();
  SimJobs(const SimJobs&) = delete;
  SimJobs& operator=(const SimJobs&) = delete;

  // Starts the job's thread (the scenario file was checked when it was read). Refused while
  // kMaxRunning jobs run.
  Result<uint64_t> start(SimJobSpec spec);

  Result<SimJobView> view(uint64_t id) const;
  std::optional<SimJobView> latest() const;  // the most recently started job
  std::vector<SimJobView> list() const;      // oldest first

  // The result of a job that is done; otherwise an error saying where the job stands.
  Result<std::shared_ptr<const SimResult>> result(uint64_t id) const;

  // Asks a running job to stop: true if it was running, false if it had already finished.
  Result<bool> cancel(uint64_t id);

 private:
  struct Job;

  Job* find(uint64_t id) const;
  Error unknown(uint64_t id) const;
  size_t running() const;
  void drop_old_finished();

  mutable std::mutex mu_;                   // guards jobs_ and next_id_ (every public call takes it)
  std::deque<std::unique_ptr<Job>> jobs_;  // oldest first
  uint64_t next_id_ = 1;
};

}  // namespace sal::sim
