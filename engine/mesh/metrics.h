// metrics.h — what the controller keeps about training: one record per committed step (loss,
// tokens/s, gradient norm, ...), written to <run>/metrics.csv as it goes and kept in memory for
// job.metrics() and the run summary; and a window of recent per-expert token counts, the loads the
// allocation and placement policies balance.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::mesh {

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
  // the mean (each expert's tokens shared evenly over its replicas), averaged over layers. 1 is even.
  double imbalance = 1;
};

// Per layer, the busiest worker's expert work over the mean (algo::placement_imbalance): loads
// [layer][expert] flattened, placement[layer][worker] = slots. 1 for a layer the loads do not fit.
std::vector<double> layer_imbalances(const std::vector<double>& loads,
                                     const std::vector<std::vector<std::vector<uint32_t>>>& placement, size_t experts);
// Their mean over the layers: the imbalance of one step.
double expert_imbalance(const std::vector<uint64_t>& loads, const std::vector<std::vector<std::vector<uint32_t>>>& placement,
                        size_t experts);

class MetricsLog {
 public:
  // Opens (truncates) the CSV file and writes its header. Without a call, nothing is written.
  Status open_csv(const std::string& path);
  void add(const StepRecord& r);

  const std::deque<StepRecord>& recent() const { return recent_; }
  uint64_t count() const { return count_; }
  const StepRecord* first() const { return count_ ? &first_ : nullptr; }
  const StepRecord* last() const { return recent_.empty() ? nullptr : &recent_.back(); }
  // Mean loss over the last n records (the progress line smooths with it).
  double mean_loss(size_t n) const;
  // Tokens per second over all steps: total tokens / total step time.
  double tokens_per_s() const { return step_s_ > 0 ? double(tokens_) / step_s_ : 0; }
  // The same over the most recent n steps.
  double recent_tokens_per_s(size_t n) const;

  ~MetricsLog();

 private:
  std::deque<StepRecord> recent_;
  StepRecord first_;
  uint64_t count_ = 0;
  uint64_t tokens_ = 0;
  double step_s_ = 0;
  FILE* csv_ = nullptr;
};

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

 private:
  size_t layers_, experts_, capacity_;
  std::deque<std::vector<uint64_t>> steps_;
  std::vector<uint64_t> sum_;
};

}  // namespace sal::mesh
