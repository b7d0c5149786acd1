// measurements.h — what the job driver measures about a run, as plain values: one record per
// committed step (loss, tokens/s, gradient norm, balance), the window of recent per-expert token
// counts that the allocation and placement policies balance, each recovery from a loss to the
// next committed step, and the figures the checkpoint policy decides from (the median iteration
// time and the snapshot copy bandwidth, both measured, and expert popularity from the loads) —
// kept together by Measurements, the driver's part that owns them.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/book.h"
#include "core/ids.h"
#include "core/model_shape.h"
#include "job/health.h"

#include "policy/plan_ask.h"

namespace sal::job {

struct StepRecord {
  uint64_t step = 0;
  double loss = 0;          // cross-entropy per token + the weighted balancing loss
  double ce = 0;            // cross-entropy per token
  double aux = 0;           // the weighted Switch balancing loss
  double grad_norm = 0;     // before clipping
  double lr = 0;
  uint64_t tokens = 0;      // tokens in the step (the global batch)
  double step_ms = 0;       // StepBegin sent to the last vote, at the controller
  double compute_ms = 0;    // the slowest worker's forward + backward + gradient sync
  double tokens_per_s = 0;  // tokens / step_ms
  uint32_t workers = 0;
  uint64_t plan = 0;
  double time_s = 0;        // since the controller started
  // Expert work balance under the plan: per layer, the most expert tokens any worker computes over
  // the mean (as train.dispatch splits each expert's tokens over its replicas), averaged over
  // layers. 1 is even.
  double imbalance = 1;
  // The validation loss (cross-entropy per token of train.eval_sequences held-out sequences) of the
  // weights the step began from, on a step of train.eval_every; NaN on the others.
  double val_loss = std::numeric_limits<double>::quiet_NaN();
};

// Parts of a validation loss (each worker's cross-entropy sum and tokens) as one loss per token;
// NaN for none.
double validation_loss(const std::map<Participant, std::pair<double, uint64_t>>& parts);

// Per layer, the busiest worker's expert work over the mean (algo::placement_imbalance): loads
// [layer][expert] flattened, placement[layer][worker] = slots. 1 for a layer the loads do not fit.
std::vector<double> layer_imbalances(const std::vector<double>& loads,
                                     const std::vector<std::vector<std::vector<uint32_t>>>& placement, size_t experts);
// The imbalance of one step, its layers' mean: per layer, the busiest node's expert tokens over the
// mean as the dispatcher splits them (core/expert_split.h: by the step's counts, or evenly).
double expert_imbalance(const std::vector<uint64_t>& loads, const std::vector<std::vector<std::vector<uint32_t>>>& placement,
                        size_t experts, bool by_counts);

// Token-to-expert counts summed over the last `capacity` steps, per layer and expert.
class LoadWindow {
 public:
  LoadWindow(size_t layers, size_t experts, size_t capacity);
  // One step's counts, [layer][expert] flattened (the sum of every worker's vote).
  void add(const std::vector<uint64_t>& counts);
  bool empty() const { return steps_.empty(); }
  size_t steps() const { return steps_.size(); }
  // Mean tokens per step of every expert, [layer][expert].
  std::vector<std::vector<double>> mean() const;
  // The last `count` steps (fewer when the window holds fewer), oldest first, each [layer][expert]
  // (a count above 2^32 - 1 is clamped): what the placement judges a layout's per-step split on.
  policy::StepLoads recent(size_t count) const;

 private:
  size_t layers_, experts_, capacity_;
  std::deque<std::vector<uint64_t>> steps_;
  std::vector<uint64_t> sum_;
};

struct RecoveryRecord {
  std::string cause;
  std::string kind;     // the ladder's rung that recovered: "elastic" or "restore"
  double at_s = 0;      // when the loss was noticed (seconds since the controller started)
  double seconds = 0;   // until the next step committed, less capacity_wait_s and interrupted_s: the engine's time
  uint64_t step = 0;    // the step that committed
  std::string source;   // a restore's: "disk" (a dense snapshot) or "seed"; "" for elastic
  uint64_t rerun = 0;   // a restore's committed steps run again
  double capacity_wait_s = 0;  // waiting for workers enough to plan (the trace's doing, not the engine's)
  // Under losses back to back: computing steps that a later loss aborted, after a plan of this
  // recovery went into force (work the trace cost, as a step a single loss aborts; not the engine's).
  double interrupted_s = 0;
};

// The median of `v` (for an even count the upper of the two middle values); 0 when empty.
double median_of(std::vector<double> v);

// The median of the last `capacity` samples (a step time that a rebalance or a restore made slow
// does not move it much).
class MovingMedian {
 public:
  explicit MovingMedian(size_t capacity) : capacity_(capacity ? capacity : 1) {}
  void add(double x);
  bool empty() const { return samples_.empty(); }
  double median() const;

 private:
  size_t capacity_;
  std::deque<double> samples_;
};

// The sparse snapshots (MoEtion) a worker holds, as its last vote said (wire::StepVote).
struct SparseHolding {
  uint64_t bytes = 0;
  int64_t window_from = -1, window_to = -1;  // the newest complete window's iterations (-1: none)
  double copy_ms = 0;                        // the last slot's copy
  uint64_t step = 0;                         // the step of the vote that said so
  uint64_t log_bytes = 0;                    // that step's upstream log (0: none put)
  double path_cpu_ms = 0;                    // the last slot's whole path on the snapshot thread, CPU time
};

// What the checkpoint policy decides from, measured by the driver (policy/plan_ask.h).
using CheckpointFacts = policy::CheckpointFacts;

// The driver's measurements of a run: the load window, the median step time, the snapshot copy
// bandwidth (dense snapshots' and sparse slots'), what each worker holds of the sparse snapshots,
// and the checkpoint policy's facts made of them.
class Measurements {
 public:
  Measurements(const ModelShape& shape, size_t load_window);

  // A step committed: its per-expert counts ([layer][expert] flattened) and its time.
  void step_committed(const std::vector<uint64_t>& loads, double step_s);
  // A copy of `bytes` took `ms` (a dense snapshot's slowest rank, or a sparse slot).
  void copied(double bytes, double ms);
  // A recovery ended (the engine's time: capacity waits are not in it): the placement's failure
  // facts weigh a wipe-out by the restores and re-plans this job has seen.
  void recovered(const RecoveryRecord& r);
  // A plan came into force `s` seconds after its switch began (its ranks connecting, moving state):
  // switch_s() is the median of the recent ones (0: none yet).
  void switched(double s) {
    switch_s_.add(s);
    facts_.switch_s = switch_s_.median();
  }
  double switch_s() const { return facts_.switch_s; }
  // Its workers that received expert replicas (and nothing else) took `per_worker` seconds a
  // replica each (their migration over the replicas): the switch's median is one sample of
  // facts().replica_s, the median of the recent switches'. A switch that moved no expert says nothing.
  void fetched(const std::vector<double>& per_worker);
  // What a worker's vote said of its sparse snapshots (wire::StepVote's sparse_* fields); a slot
  // big enough to time measures the copy bandwidth, once per copy.
  void sparse_held(Participant p, const SparseHolding& h, uint64_t slot_bytes);
  // A step committed with these workers' times (the votes'): the speed verdicts that changed
  // (health.h). Workers no longer among `ranks` are forgotten; `pools` says which share their
  // host's CPUs.
  std::vector<SpeedChange> worker_times(uint64_t step, const std::map<Participant, WorkerTimes>& times,
                                        const std::vector<Participant>& ranks, const CpuPools& pools = {});
  // The warning to give, once a job, when a dense snapshot is written more slowly than the steps
  // between two snapshots run (they fall behind the disk); nothing otherwise.
  std::optional<std::string> disk_behind(const ckpt::Snapshot& s, int64_t checkpoint_every);

  const LoadWindow& loads() const { return loads_; }
  const CheckpointFacts& facts() const { return facts_; }
  const std::map<Participant, SparseHolding>& sparse() const { return sparse_; }
  const SpeedWatch& speed() const { return speed_; }
  SpeedWatch& speed() { return speed_; }

 private:
  LoadWindow loads_;
  MovingMedian step_s_;
  MovingMedian copy_Bps_;
  MovingMedian path_Bps_;  // a sparse slot's whole path, bytes a CPU-second of its writer's thread
  MovingMedian replan_s_, restore_s_, restore_rerun_, switch_s_, replica_s_;
  CheckpointFacts facts_;
  std::map<Participant, SparseHolding> sparse_;
  SpeedWatch speed_;
  bool disk_behind_said_ = false;
};

}  // namespace sal::job
