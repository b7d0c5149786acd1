// metrics.cpp — see metrics.h.
#include "mesh/metrics.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "policy/algo/placement_balance.h"

namespace sal::mesh {

// Records kept in memory (job.metrics() shows a tail; the CSV has them all).
constexpr size_t kRecentRecords = 4096;

MetricsLog::~MetricsLog() {
  if (csv_) std::fclose(csv_);
}

Status MetricsLog::open_csv(const std::string& path) {
  if (csv_) std::fclose(csv_);
  csv_ = std::fopen(path.c_str(), "w");
  if (!csv_) return fail("cannot write ", path, ": ", std::strerror(errno));
  std::fprintf(csv_, "step,loss,ce,aux,grad_norm,lr,tokens,step_ms,compute_ms,tokens_per_s,workers,plan,time_s,imbalance\n");
  std::fflush(csv_);
  return {};
}

void MetricsLog::add(const StepRecord& r) {
  if (count_ == 0) first_ = r;
  ++count_;
  tokens_ += r.tokens;
  step_s_ += r.step_ms / 1e3;
  recent_.push_back(r);
  if (recent_.size() > kRecentRecords) recent_.pop_front();
  if (!csv_) return;
  std::fprintf(csv_, "%llu,%.6f,%.6f,%.6f,%.6f,%.6g,%llu,%.3f,%.3f,%.1f,%u,%llu,%.3f,%.3f\n",
               static_cast<unsigned long long>(r.step), r.loss, r.ce, r.aux, r.grad_norm, r.lr,
               static_cast<unsigned long long>(r.tokens), r.step_ms, r.compute_ms, r.tokens_per_s, r.workers,
               static_cast<unsigned long long>(r.plan), r.time_s, r.imbalance);
  std::fflush(csv_);
}

double MetricsLog::mean_loss(size_t n) const {
  n = std::min(n, recent_.size());
  if (n == 0) return 0;
  double s = 0;
  for (size_t i = recent_.size() - n; i < recent_.size(); ++i) s += recent_[i].loss;
  return s / double(n);
}

double MetricsLog::recent_tokens_per_s(size_t n) const {
  n = std::min(n, recent_.size());
  double tokens = 0, s = 0;
  for (size_t i = recent_.size() - n; i < recent_.size(); ++i) {
    tokens += double(recent_[i].tokens);
    s += recent_[i].step_ms / 1e3;
  }
  return s > 0 ? tokens / s : 0;
}

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

double expert_imbalance(const std::vector<uint64_t>& loads, const std::vector<std::vector<std::vector<uint32_t>>>& placement,
                        size_t experts) {
  if (placement.empty()) return 1;
  const auto per_layer = layer_imbalances(std::vector<double>(loads.begin(), loads.end()), placement, experts);
  double sum = 0;
  for (double x : per_layer) sum += x;
  return sum / double(per_layer.size());
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

}  // namespace sal::mesh
