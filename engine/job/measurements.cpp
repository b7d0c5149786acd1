// measurements.cpp — see measurements.h.
#include "job/measurements.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/expert_split.h"
#include "policy/algo/placement_balance.h"

namespace sal::job {

// The checkpoint policy's measured inputs: medians over this many recent steps and copies.
constexpr size_t kMedianSteps = 20;
constexpr size_t kMedianCopies = 5;
// ... and over this many recent recoveries of each kind.
constexpr size_t kMedianRecoveries = 5;
// A sparse slot this big or bigger times the copy bandwidth (a smaller one is all overhead).
constexpr uint64_t kTimedSlotBytes = 1u << 20;

std::vector<double> layer_imbalances(const std::vector<double>& loads,
                                     const std::vector<std::vector<std::vector<uint32_t>>>& placement, size_t experts) {
  std::vector<double> out(placement.size(), 1.0);
  if (loads.size() != placement.size() * experts) return out;
  for (size_t l = 0; l < placement.size(); ++l) {
    algo::LayerPlacement layer{int(experts), {}};
    for (const auto& slots : placement[l]) layer.nodes.emplace_back(slots.begin(), slots.end());
    const std::vector<double> row(loads.begin() + long(l * experts), loads.begin() + long((l + 1) * experts));
    if (auto r = algo::placement_imbalance(layer, row)) out[l] = *r;
  }
  return out;
}

double validation_loss(const std::map<Participant, std::pair<double, uint64_t>>& parts) {
  double ce = 0;
  uint64_t tokens = 0;
  for (const auto& [who, part] : parts) ce += part.first, tokens += part.second;
  return tokens ? ce / double(tokens) : std::numeric_limits<double>::quiet_NaN();
}

double expert_imbalance(const std::vector<uint64_t>& loads, const std::vector<std::vector<std::vector<uint32_t>>>& placement,
                        size_t experts, bool by_counts) {
  if (placement.empty() || loads.size() != placement.size() * experts) return 1;
  double sum = 0;
  for (size_t l = 0; l < placement.size(); ++l) {
    const SplitTable units = units_of(placement[l], experts);
    const std::vector<uint64_t> totals(loads.begin() + long(l * experts), loads.begin() + long((l + 1) * experts));
    sum += split_imbalance(by_counts ? balanced_split(totals, units, {}) : even_split(totals, units, {}), {});
  }
  return sum / double(placement.size());
}

LoadWindow::LoadWindow(size_t layers, size_t experts, size_t capacity)
    : layers_(layers), experts_(experts), capacity_(std::max<size_t>(capacity, 1)), sum_(layers * experts, 0) {}

void LoadWindow::add(const std::vector<uint64_t>& counts) {
  if (counts.size() != sum_.size()) return;
  steps_.push_back(counts);
  for (size_t i = 0; i < counts.size(); ++i) sum_[i] += counts[i];
  if (steps_.size() > capacity_) {
    for (size_t i = 0; i < sum_.size(); ++i) sum_[i] -= steps_.front()[i];
    steps_.pop_front();
  }
}

std::vector<std::vector<double>> LoadWindow::mean() const {
  std::vector<std::vector<double>> out(layers_, std::vector<double>(experts_, 0.0));
  if (steps_.empty()) return out;
  for (size_t l = 0; l < layers_; ++l)
    for (size_t e = 0; e < experts_; ++e) out[l][e] = double(sum_[l * experts_ + e]) / double(steps_.size());
  return out;
}

policy::StepLoads LoadWindow::recent(size_t count) const {
  policy::StepLoads out;
  for (size_t s = steps_.size() - std::min(count, steps_.size()); s < steps_.size(); ++s) {
    std::vector<std::vector<uint32_t>> step(layers_, std::vector<uint32_t>(experts_, 0));
    for (size_t l = 0; l < layers_; ++l)
      for (size_t e = 0; e < experts_; ++e)
        step[l][e] = uint32_t(std::min<uint64_t>(steps_[s][l * experts_ + e], UINT32_MAX));
    out.push_back(std::move(step));
  }
  return out;
}

void MovingMedian::add(double x) {
  samples_.push_back(x);
  if (samples_.size() > capacity_) samples_.pop_front();
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + long(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

double MovingMedian::median() const { return median_of({samples_.begin(), samples_.end()}); }

Measurements::Measurements(const ModelShape& shape, size_t load_window)
    : loads_(size_t(shape.layers), size_t(shape.experts), std::max<size_t>(load_window, 1)),
      step_s_(kMedianSteps),
      copy_Bps_(kMedianCopies),
      path_Bps_(kMedianCopies),
      replan_s_(kMedianRecoveries),
      restore_s_(kMedianRecoveries),
      restore_rerun_(kMedianRecoveries),
      switch_s_(kMedianRecoveries),
      replica_s_(kMedianRecoveries) {}

void Measurements::fetched(const std::vector<double>& per_worker) {
  if (per_worker.empty()) return;
  replica_s_.add(median_of(per_worker));
  facts_.replica_s = replica_s_.median();
}

void Measurements::step_committed(const std::vector<uint64_t>& loads, double step_s) {
  loads_.add(loads);
  step_s_.add(step_s);
  facts_.iteration_s = step_s_.median();
  facts_.popularity = loads_.mean();
  for (auto& layer : facts_.popularity) {
    double sum = 0;
    for (double x : layer) sum += x;
    for (double& x : layer) x = sum > 0 ? x / sum : 0;
  }
}

void Measurements::copied(double bytes, double ms) {
  if (bytes <= 0 || ms <= 0) return;
  copy_Bps_.add(bytes / (ms / 1e3));
  facts_.bandwidth_Bps = copy_Bps_.median();
}

void Measurements::recovered(const RecoveryRecord& r) {
  if (r.seconds <= 0) return;
  if (r.kind == "restore") {
    restore_s_.add(r.seconds);
    facts_.restore_s = restore_s_.median();
    restore_rerun_.add(double(r.rerun));
    facts_.restore_rerun = restore_rerun_.median();
  } else if (r.kind == "elastic") {
    replan_s_.add(r.seconds);
    facts_.replan_s = replan_s_.median();
  }
}

void Measurements::sparse_held(Participant p, const SparseHolding& h, uint64_t slot_bytes) {
  auto it = sparse_.find(p);
  bool new_copy = it == sparse_.end() || it->second.copy_ms != h.copy_ms;  // a vote repeats the last copy until the next
  sparse_[p] = h;
  if (!new_copy || slot_bytes < kTimedSlotBytes) return;
  copied(double(slot_bytes), h.copy_ms);
  if (h.path_cpu_ms > 0) {
    path_Bps_.add(double(slot_bytes) / (h.path_cpu_ms / 1e3));
    facts_.path_Bps = path_Bps_.median();
  }
}

// A GPU worker's next snapshot waits for the previous (its pinned copy is taken once the previous
// is on its way to disk), pausing training; a CPU worker's copies queue up in host memory. Said
// with the interval that would keep up.
std::optional<std::string> Measurements::disk_behind(const ckpt::Snapshot& s, int64_t checkpoint_every) {
  if (disk_behind_said_ || facts_.iteration_s <= 0 || checkpoint_every <= 0) return std::nullopt;
  double between_s = facts_.iteration_s * double(checkpoint_every);
  double write_s = s.slowest_ms / 1e3;
  if (write_s <= between_s) return std::nullopt;
  disk_behind_said_ = true;
  char text[384];
  std::snprintf(text, sizeof text,
                "the snapshot of step %llu took %.1f s to write, longer than the %lld steps between snapshots "
                "(%.1f s): snapshots fall behind the disk (a GPU worker's next one pauses training until the "
                "previous is written; a CPU worker's queue in memory); train.checkpoint_every = %lld or more keeps up",
                (unsigned long long)s.step, write_s, (long long)checkpoint_every, between_s,
                (long long)std::ceil(write_s / facts_.iteration_s));
  return std::string(text);
}

std::vector<SpeedChange> Measurements::worker_times(uint64_t step, const std::map<Participant, WorkerTimes>& times,
                                                    const std::vector<Participant>& ranks, const CpuPools& pools) {
  speed_.keep_only(ranks);
  return speed_.observe(step, times, pools);
}

}  // namespace sal::job
