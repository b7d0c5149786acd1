// health.h — gray failures seen from the votes: which worker is slow, and by how much. Every vote
// says where the worker's step time went (wire::StepVote: computing, in the passes' token
// exchanges, in the gradient sync, the last update). In lockstep a slow worker computes long and
// waits little, its peers the other way round, so the step's time says nothing about who is slow
// but each worker's computing time does, weighed by its work and split in two:
//  - how fast it works: its step thread's CPU time over what its work would take at the others'
//    speed (the median of their CPU milliseconds per token outside the experts and per row in them:
//    workers hold different experts, and one whose experts drew twice the tokens computes twice
//    as long without being slow) — a slower core, or frequency throttling;
//  - how much CPU it gets: the others' CPU per wall millisecond of computing (the median; the
//    process's, so its own background work — snapshot copies — counts as CPU it got) over its
//    own — a cut CPU quota, a noisy neighbour.
// Its ratio is the product: 2 for a worker at half speed either way. Without CPU times measured
// (a GPU), the wall time over the median of the others'.
//
// Beside the speed, each worker's lag: its computing time over the others' in the same step (the
// median of theirs), whatever work it had — what a worker costs the lockstep. A worker given less
// work (the health policy's shares) that keeps up has a lag near 1 though it is still slow; the
// health policy steers its share by it, and the lag is measured afresh when the share changes.
//
// Workers that share one host's CPUs without quotas of their own (a CpuPool) are not weighed
// against each other for their share of those CPUs — the host's scheduler hands it out — only
// against workers outside the pool, and only for how fast their work runs where there are none.
//
// The verdict is robust against a shared machine's noise (a worker descheduled for a step, a page
// fault, a busy neighbour): it looks at the ratio over the last `window` committed steps that
// worker was in, and names it slow only when nearly all of them (the window's lowest fifth) are at
// `slow_ratio` or more — stalls come and go, a slow node stays slow — and back when the window's
// median is at `back_ratio` or less; the ratio it reports is the window's median. A worker nearly
// all of whose last half window is at 5/3 of `slow_ratio` (2.5x) or more is plainly slow and named
// then (about half a window after a cut to a third of its speed). With the
// defaults (10 steps, 1.5, 1.25) a worker that slows to half its speed is named within 10 steps,
// and given back about 6 steps after its recovery. Pure logic:
// the driver feeds it at every commit and says what changed as events (node_slow, node_speed_back).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "core/ids.h"

namespace sal::job {

// One worker's times in one step (milliseconds) and its work. Wall time: computing (busy_ms),
// in the passes' token exchanges, in the gradient sync, its last update. CPU time outside the
// collectives (0: not measured): the step thread's, of it its experts', and the whole process's.
// Work: the tokens of its share of the batch, the rows its experts computed.
struct WorkerTimes {
  double busy_ms = 0, exchange_ms = 0, sync_ms = 0, update_ms = 0;
  double busy_cpu_ms = 0, expert_cpu_ms = 0, process_cpu_ms = 0;
  uint64_t tokens = 0, expert_rows = 0;
};

// The first steps under each plan are not measured (the driver skips them): they connect the data
// plane, allocate and fault pages in.
constexpr uint64_t kUnsettledSteps = 3;

// Workers that share their host's CPUs (unconfined, on one host), by pool (the host's name).
using CpuPools = std::map<Participant, std::string>;

struct HealthOptions {
  size_t window = 20;        // committed steps a verdict looks at
  double slow_ratio = 1.5;   // the window's median ratio at which a worker is named slow
  double back_ratio = 1.25;  // ... and at which its speed is back
};

// What is known of one worker: its window's medians and its verdict.
struct WorkerHealth {
  Participant who;
  WorkerTimes median;    // per phase, over the window
  double ratio = 1;      // its computing time over the others' for the same work, the window's median
  double lag = 1;        // its computing time over the others' in the same step, the window's median
  size_t steps = 0;      // steps in the window so far
  bool slow = false;
  uint64_t since_step = 0;  // the step of the last verdict (slow or back)
};

// A verdict that changed at a commit.
struct SpeedChange {
  Participant who;
  bool slow = false;  // named slow (else: its speed is back)
  double ratio = 1;
  uint64_t step = 0;
};

class SpeedWatch {
 public:
  explicit SpeedWatch(HealthOptions o = {}) : o_(o) {}

  // One committed step's times of every worker that voted in it. A worker missing from a step
  // keeps its window (it is measured again when it is back); forget() drops one that left.
  // `pools`: the CPU pool of each worker that shares its host's CPUs with other workers of the job
  // (unconfined on one host; absent: CPUs of its own). Its share of CPU is weighed only against
  // workers outside its pool — the host's scheduler, not a fault, decides how pool-mates share.
  std::vector<SpeedChange> observe(uint64_t step, const std::map<Participant, WorkerTimes>& times,
                                   const CpuPools& pools = {});
  void forget(const Participant& who) { workers_.erase(who); }
  // The worker's work changed (its share): its lag is measured afresh from the next step.
  void restart_lag(const Participant& who);
  // Forgets every worker not among `workers` (they left the plan).
  void keep_only(const std::vector<Participant>& workers);

  std::vector<WorkerHealth> report() const;
  size_t slow_count() const;
  const HealthOptions& options() const { return o_; }

 private:
  struct Track {
    std::deque<double> ratios, lags;
    std::deque<WorkerTimes> times;
    bool slow = false;
    uint64_t since_step = 0;
  };
  WorkerHealth health_of(const Participant& who, const Track& t) const;

  HealthOptions o_;
  std::map<Participant, Track> workers_;
};

// "worker 2.0 computes 1.96x the others' time (the median of its last 10 steps)".
std::string describe(const SpeedChange& c, size_t window);

}  // namespace sal::job
