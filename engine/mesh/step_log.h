// step_log.h — the controller's log of committed steps: the driver's record of each (loss, tokens/s,
// gradient norm, ..., the validation loss on a step of train.eval_every: job/measurements.h),
// written to <run>/metrics.csv as it goes and kept in memory for job.metrics(), the progress line
// and the run summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "job/measurements.h"

namespace sal::mesh {

using job::StepRecord;

class StepLog {
 public:
  // Opens (truncates) the CSV file, or with `resume_at` continues it from that step: the rows of
  // later steps, written before a commit the journal never recorded, are dropped, and those kept
  // are read back (first(), count(), tokens_per_s() cover the whole run). A new file gets its
  // header. Without a call, nothing is written.
  Status open_csv(const std::string& path, std::optional<uint64_t> resume_at = std::nullopt);
  void add(const StepRecord& r);

  const std::deque<StepRecord>& recent() const { return recent_; }
  uint64_t count() const { return count_; }
  uint64_t tokens() const { return tokens_; }  // in every committed step
  const StepRecord* first() const { return count_ ? &first_ : nullptr; }
  const StepRecord* last() const { return recent_.empty() ? nullptr : &recent_.back(); }
  // The first and the latest steps with a validation loss (train.eval_every); none without.
  const std::optional<StepRecord>& first_validated() const { return first_val_; }
  const std::optional<StepRecord>& last_validated() const { return last_val_; }
  // Mean loss over the last n records (the progress line smooths with it).
  double mean_loss(size_t n) const;
  // Tokens per second over all steps: total tokens / total step time.
  double tokens_per_s() const { return step_s_ > 0 ? double(tokens_) / step_s_ : 0; }
  // The same over the most recent n steps (the progress line and the metrics endpoint: kRecentSteps).
  double recent_tokens_per_s(size_t n) const;
  static constexpr size_t kRecentSteps = 20;

  ~StepLog();

 private:
  void remember(const StepRecord& r);  // the in-memory part of add()
  std::deque<StepRecord> recent_;
  StepRecord first_;
  std::optional<StepRecord> first_val_, last_val_;
  uint64_t count_ = 0;
  uint64_t tokens_ = 0;
  double step_s_ = 0;
  FILE* csv_ = nullptr;
};

}  // namespace sal::mesh
