// model_cuda_checks.h — what the GPU model tests of both families share (test_model_cuda.cpp for
// moe-gpt, test_model_llama_cuda.cpp for moe-llama): the repo's docs/ as a corpus, parameters put
// on the device, one step of the CPU model (make_model) and of the GPU model (make_device_model)
// from zeroed gradients, the comparison of their losses, expert counts and every unit's gradient,
// and a probe of the gate's top-k gaps (the GPU's bf16 GEMMs can flip a near tie, so the
// gate-routed comparisons run on batches the CPU shows to have none).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#include "model/cuda/device_exchange.h"
#include "model/cuda/device_model.h"
#include "model/cuda/device_params.h"
#include "model/cuda/optimizer_cuda.h"
#include "model/local_exchange.h"
#include "model/model.h"
#include "model/optimizer.h"

#define REQUIRE_OK(expr)                                                        \
  do {                                                                          \
    auto&& r_ = (expr);                                                         \
    REQUIRE_MESSAGE(r_.ok(), (r_.ok() ? std::string() : r_.error().message())); \
  } while (0)

namespace sal::model::gpu_checks {

constexpr double kLossTol = 1e-2;  // ce and aux, relative

// The repo's docs/: real English text that is always there.
inline Corpus docs_corpus(int seq_len) {
  auto c = Corpus::load(std::string(SAL_SOURCE_DIR) + "/docs", "bytes", 256, seq_len);
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message()));
  return std::move(*c);
}

inline std::unique_ptr<DeviceParams> on_device(const Params& p, LmHead head = LmHead::automatic) {
  auto r = DeviceParams::create(test::gpu::ctx(), p, head);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message()));
  return std::move(*r);
}

inline StepStats cpu_step(Params& p, const Batch& b, int64_t global, ExpertExchange* ex = nullptr) {
  LocalExchange local(p);
  auto m = make_model(p);
  p.zero_grads();
  auto s = m->step(b, global, ex ? *ex : local);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message()));
  return *s;
}

inline StepStats gpu_step(DeviceParams& dp, const Batch& b, int64_t global,
                          kc::GroupedGemmMode mode = kc::GroupedGemmMode::grouped, DeviceExchange* ex = nullptr) {
  LocalDeviceExchange local(dp, mode);
  auto m = make_device_model(dp);
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message()));
  REQUIRE_OK(dp.zero_grads());
  auto s = (*m)->step(b, global, ex ? *ex : local);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message()));
  return *s;
}

inline double rel(double got, double ref) { return std::fabs(got - ref) / std::max(1e-12, std::fabs(ref)); }

// Losses, counts and every unit's gradient of a GPU step against the CPU step just taken on cpu.
inline void check_step(const StepStats& cs, const StepStats& gs, Params& cpu, DeviceParams& gpu, double grad_tol) {
  MESSAGE("ce " << cs.ce_sum << " (cpu) " << gs.ce_sum << " (gpu), aux " << cs.aux << " / " << gs.aux << ", z "
                << cs.z_sum << " / " << gs.z_sum);
  CHECK(gs.tokens == cs.tokens);
  CHECK(rel(gs.ce_sum, cs.ce_sum) <= kLossTol);
  CHECK(rel(gs.aux, cs.aux) <= kLossTol);
  CHECK(std::fabs(gs.z_sum - cs.z_sum) <= kLossTol * std::max(1e-12, std::fabs(cs.z_sum)));
  CHECK(gs.expert_counts == cs.expert_counts);
  Params got = cpu;
  REQUIRE_OK(gpu.download(got, kGrads));
  auto want = cpu.units();
  auto have = got.units();
  REQUIRE(want.size() == have.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(want[i]->id.name());
    double e = test::gpu::rel_error(have[i]->g, want[i]->g);
    worst = std::max(worst, e);
    CHECK(e <= grad_tol);
  }
  MESSAGE("worst unit gradient error " << worst);
}

// The top-k gap of every token's gate logits, recomputed in double from the gate's input (the x the
// model hands the exchange) and the gate weights; then LocalExchange's work. (Softmax and sigmoid
// scores keep the logits' order, so the logits' gap is the choice's margin.)
struct GapProbe : LocalExchange {
  explicit GapProbe(Params& p) : LocalExchange(p), p_(p) {}
  Status forward(int layer, const float* x, const Routing& r, float* out) override {
    const int D = p_.dims.d, E = p_.dims.experts, K = p_.dims.top_k;
    const float* w = p_.gate[size_t(layer)].at(gate_layout(p_.dims).w);
    std::vector<double> logit(static_cast<size_t>(E));
    for (int t = 0; t < r.tokens; ++t) {
      for (int e = 0; e < E; ++e) {
        double s = 0;
        for (int i = 0; i < D; ++i) s += double(x[size_t(t) * D + i]) * w[size_t(i) * E + e];
        logit[size_t(e)] = s;
      }
      std::sort(logit.begin(), logit.end(), std::greater<double>());
      min_gap = std::min(min_gap, logit[size_t(K) - 1] - logit[size_t(K)]);
    }
    return LocalExchange::forward(layer, x, r, out);
  }
  Params& p_;
  double min_gap = 1e300;
};

// The first batch (of `sequences` sequences, seed 11) among 512 whose every top-k gate gap is at
// least min_gap on the CPU model; its index (the test fails if there is none). The corpus is the
// repo's docs/, so which batch it is moves as the pages change; the search only runs the CPU.
inline int batch_without_near_ties(Params& cpu, const Corpus& c, int sequences, double min_gap) {
  for (int s = 0; s < 512; ++s) {
    GapProbe probe(cpu);
    cpu_step(cpu, make_batch(c, 11, uint64_t(s), 0, sequences, cpu.dims.seq_len), int64_t(sequences) * cpu.dims.seq_len,
             &probe);
    if (probe.min_gap >= min_gap) {
      MESSAGE("batch " << s << ", smallest top-k gate gap " << probe.min_gap);
      return s;
    }
  }
  FAIL("no batch among 512 without a near tie in the gate");
  return -1;
}

// Each side's mean cross-entropy per step of training the same parameters on the same batches: the
// GPU model (OptimizerCuda) and the CPU model (apply_adamw, the global norm's clip).
struct Losses {
  std::vector<double> gpu, cpu;
};
inline Losses train_both(Params& cpu, const Corpus& c, const OptimConfig& oc, int B, int steps) {
  const int64_t global = int64_t(B) * cpu.dims.seq_len;
  auto gpu = on_device(cpu);
  LocalDeviceExchange gex(*gpu);
  auto gm = make_device_model(*gpu);
  REQUIRE(gm.ok());
  OptimizerCuda opt(*gpu, oc);
  Losses out;
  for (int s = 0; s < steps; ++s) {
    Batch b = make_batch(c, 3, uint64_t(s), 0, B, cpu.dims.seq_len);
    REQUIRE_OK(gpu->zero_grads());
    auto gs = (*gm)->step(b, global, gex);
    REQUIRE_MESSAGE(gs.ok(), (gs.ok() ? "" : gs.error().message()));
    REQUIRE_OK(opt.step(s));
    out.gpu.push_back(gs->ce_sum / double(global));
    StepStats cs = cpu_step(cpu, b, global);
    double norm2 = 0;
    for (Unit* u : cpu.units()) norm2 += grad_sum_squares(*u);
    apply_adamw(cpu, oc, learning_rate(oc, s), clip_scale(oc, std::sqrt(norm2)), s + 1);
    out.cpu.push_back(cs.ce_sum / double(global));
  }
  return out;
}

inline double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / double(to - from);
}

// 40 steps of a byte model (train_both): the GPU's loss starts untrained, falls by a fifth, and its
// last five steps are within a fifth of the CPU's.
inline void check_learns_like_cpu(const Losses& l) {
  REQUIRE(l.gpu.size() == 40);
  const double g_first = mean_of(l.gpu, 0, 3), g_last = mean_of(l.gpu, 35, 40), c_last = mean_of(l.cpu, 35, 40);
  MESSAGE("loss (gpu) " << l.gpu.front() << " -> " << l.gpu.back() << ", last five " << g_last
                        << "; cpu last five " << c_last);
  CHECK(g_first > 5.0);  // about ln 256 = 5.55 at the start
  CHECK(g_last < 0.8 * g_first);
  CHECK(std::fabs(g_last - c_last) <= 0.2 * c_last);
}

}  // namespace sal::model::gpu_checks
