// workload.cpp — see workload.h.
#include "sim/workload.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "policy/algo/rng.h"
#include "core/load_trace.h"

namespace sal::sim {
namespace {

using Matrix = std::vector<std::vector<double>>;

std::vector<double> normalised(std::vector<double> v) {
  double sum = std::accumulate(v.begin(), v.end(), 0.0);
  for (auto& x : v) x = sum > 0 ? x / sum : 1.0 / double(v.size());
  return v;
}

// Zipf weights 1/(rank+1)^s over experts whose ranks are rotated by `shift` and shuffled per layer.
Matrix zipf(const Scenario& s, double exponent, size_t shift) {
  uint32_t E = s.workload.experts;
  Matrix m;
  for (uint32_t l = 0; l < s.workload.layers; ++l) {
    std::vector<uint32_t> rank(E);
    std::iota(rank.begin(), rank.end(), 0);
    algo::Rng rng(s.seed * 1315423911u + l);
    for (uint32_t i = E; i > 1; --i) std::swap(rank[i - 1], rank[rng.below(i)]);
    std::vector<double> w(E);
    for (uint32_t e = 0; e < E; ++e) w[e] = 1 / std::pow(double((rank[(e + shift) % E]) + 1), exponent);
    m.push_back(normalised(w));
  }
  return m;
}

Matrix hot(const Scenario& s) {
  const auto& l = s.workload.loads;
  std::vector<double> w(s.workload.experts, 1.0);
  for (uint32_t e = 0; e < std::min(l.hot_experts, s.workload.experts); ++e) w[e] = l.hot_factor;
  return Matrix(s.workload.layers, normalised(w));
}

Matrix table(const Scenario& s, const Matrix& t) {
  Matrix m;
  for (uint32_t l = 0; l < s.workload.layers; ++l) m.push_back(normalised(t[t.size() == 1 ? 0 : l % t.size()]));
  return m;
}

Result<std::vector<Matrix>> trace_phases(const Scenario& s) {
  auto steps = read_load_trace(s.resolve(s.workload.loads.trace_path));
  if (!steps) return fail("workload.loads.path: ", steps.error().message());
  std::vector<Matrix> phases;
  for (const auto& step : *steps) {
    if (step.loads[0].size() != s.workload.experts)
      return fail("workload.loads.path: ", step.files[0], " has ", step.loads[0].size(),
                  " experts per layer, workload.experts is ", s.workload.experts);
    phases.push_back(table(s, step.loads));
  }
  return phases;
}

}  // namespace

Result<Workload> Workload::make(const Scenario& s) {
  Workload w;
  w.s_ = &s;
  const auto& l = s.workload.loads;
  switch (l.kind) {
    case LoadSpec::Kind::uniform: w.phases_ = {Matrix(s.workload.layers, std::vector<double>(s.workload.experts, 1.0 / s.workload.experts))}; break;
    case LoadSpec::Kind::zipf: w.phases_ = {zipf(s, l.zipf_s, 0)}; break;
    case LoadSpec::Kind::hot: w.phases_ = {hot(s)}; break;
    case LoadSpec::Kind::table: w.phases_ = {table(s, l.table)}; break;
    case LoadSpec::Kind::drift:
      for (uint32_t p = 0; p < s.workload.experts; ++p) w.phases_.push_back(zipf(s, l.zipf_s, p));
      w.steps_per_phase_ = std::max<int64_t>(1, std::llround(1 / l.drift_per_step));
      break;
    case LoadSpec::Kind::trace: {
      auto phases = trace_phases(s);
      if (!phases) return phases.error();
      w.phases_ = std::move(*phases);
      w.steps_per_phase_ = l.trace_every;
      break;
    }
  }
  return w;
}

size_t Workload::phase_of(int64_t step) const {
  if (steps_per_phase_ == 0 || phases_.size() == 1) return 0;
  return size_t(std::max<int64_t>(step, 0) / steps_per_phase_) % phases_.size();
}

std::vector<std::vector<double>> Workload::token_loads(int64_t step) const {
  auto m = shares(step);
  double routed = s_->workload.tokens_per_step * s_->workload.top_k;
  for (auto& row : m)
    for (auto& x : row) x *= routed;
  return m;
}

double Workload::plan_step_s(const plan::Plan& p, int64_t step) const {
  const auto& m = s_->step;
  const auto& wl = s_->workload;
  double gpus = double(p.nodes) * s_->cluster.gpus_per_node;
  double routed = wl.tokens_per_step * wl.top_k;
  double t = m.fixed_s + m.per_gpu_s * gpus + m.dense_s_per_token * wl.tokens_per_step / gpus;
  const auto& sh = shares(step);
  std::vector<uint32_t> holders(wl.experts);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    std::fill(holders.begin(), holders.end(), 0);
    for (const auto& node : p.layers[l].placement)
      for (auto e : node) ++holders[e];
    double busiest = 0;
    for (const auto& node : p.layers[l].placement) {
      double tokens = 0;
      for (auto e : node) tokens += routed * sh[l][e] / holders[e];
      busiest = std::max(busiest, tokens);
    }
    double a2a = m.alltoall_alpha_s + m.alltoall_s_per_byte * m.token_bytes * routed / gpus;
    t += wl.layer_weight * (m.expert_s_per_token * busiest / s_->cluster.gpus_per_node + 4 * a2a);
  }
  return t + m.allreduce_alpha_s + m.allreduce_s_per_byte * 2 * m.dense_grad_bytes;
}

double Workload::stacked_step_s(double depth, uint32_t live_groups) const {
  const auto& m = s_->step;
  double gpus = double(live_groups) * s_->cluster.gpus_per_node;
  return m.fixed_s + m.per_gpu_s * gpus + depth * m.shard_s + m.allreduce_alpha_s +
         m.allreduce_s_per_byte * 2 * m.dense_grad_bytes;
}

double Workload::checkpoint_bytes() const {
  const auto& wl = s_->workload;
  return double(wl.experts) * wl.layers * wl.layer_weight * s_->step.expert_state_bytes + s_->step.dense_state_bytes;
}

}  // namespace sal::sim
