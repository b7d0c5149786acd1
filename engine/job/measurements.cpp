// measurements.cpp — see measurements.h.
#include "job/measurements.h"

#include <algorithm>

namespace sal::job {

double expert_imbalance(const std::vector<uint64_t>& loads, const std::vector<std::vector<std::vector<uint32_t>>>& placement,
                        size_t experts) {
  if (placement.empty() || loads.size() != placement.size() * experts) return 1;
  double sum = 0;
  for (size_t l = 0; l < placement.size(); ++l) {
    std::vector<double> replicas(experts, 0), work(placement[l].size(), 0);
    for (const auto& slots : placement[l])
      for (uint32_t e : slots) replicas[e] += 1;
    for (size_t w = 0; w < placement[l].size(); ++w)
      for (uint32_t e : placement[l][w]) work[w] += double(loads[l * experts + e]) / replicas[e];
    double mean = 0, most = 0;
    for (double x : work) {
      mean += x / double(work.size());
      most = std::max(most, x);
    }
    sum += mean > 0 ? most / mean : 1;
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
