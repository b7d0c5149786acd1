// measurements.cpp — see measurements.h.
#include "job/measurements.h"

#include <algorithm>

#include "policy/algo/placement_balance.h"

namespace sal::job {

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

void MovingMedian::add(double x) {
  samples_.push_back(x);
  if (samples_.size() > capacity_) samples_.pop_front();
}

double MovingMedian::median() const {
  if (samples_.empty()) return 0;
  std::vector<double> v(samples_.begin(), samples_.end());
  auto mid = v.begin() + long(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace sal::job
