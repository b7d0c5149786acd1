// run_record.h — what a run leaves for its report (`salamander report`, engine/report): the
// timeline of the training driver's phases (<run>/timeline.csv: compute, reconfigure, restore,
// wait, save), every plan put in force with its placement and the loads it was made from
// (<run>/plans.jsonl), and the recoveries with their causes and durations, the steps lost and the
// restores, which the run's summary reports. Times are seconds since the controller started.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/result.h"
#include "job/measurements.h"
#include "job/plan_switch.h"

namespace sal::mesh {

using job::AppliedPlan;
using job::RecoveryRecord;

class RunRecord {
 public:
  ~RunRecord();
  // Opens timeline.csv and plans.jsonl in `dir` (nothing is written without a call); with `append`
  // (a resumed job) they are continued.
  Status open(const std::string& dir, bool append = false);
  // The driver is now in `phase` (closing the previous interval).
  void phase(const std::string& phase, double now_s, const std::string& detail = "");
  void close(double now_s);
  void plan(const AppliedPlan& p, double now_s, const std::vector<std::vector<double>>& loads);
  void recovery(RecoveryRecord r) { recoveries_.push_back(std::move(r)); }
  void lost(uint64_t steps) { lost_steps_ += steps; }
  void restored() { ++restores_; }
  // A resumed job's record so far (from its journal): the summary counts what came before.
  void carry(std::vector<RecoveryRecord> recoveries, uint64_t lost_steps, uint64_t restores) {
    recoveries_ = std::move(recoveries);
    lost_steps_ = lost_steps;
    restores_ = restores;
  }

  const std::vector<RecoveryRecord>& recoveries() const { return recoveries_; }
  uint64_t lost_steps() const { return lost_steps_; }
  uint64_t restores() const { return restores_; }
  // seconds spent per phase so far
  double seconds_in(const std::string& phase) const;
  // {"recoveries": [...], "recovery_p50_s", "recovery_max_s", "lost_steps", "restores", "time_s": {phase: s}}
  nlohmann::ordered_json summary() const;

 private:
  FILE* timeline_ = nullptr;
  FILE* plans_ = nullptr;
  std::string phase_;
  std::string detail_;
  double since_s_ = 0;
  std::vector<std::pair<std::string, double>> totals_;
  std::vector<RecoveryRecord> recoveries_;
  uint64_t lost_steps_ = 0;
  uint64_t restores_ = 0;
};

}  // namespace sal::mesh
