// test_model_cuda.cpp — the moe-gpt model on one GPU (engine/model/cuda) against the CPU model
// (model::MoeGpt + model::LocalExchange), on identical parameters: the parameter store's round
// trips, the device expert exchange on its own, a whole step (losses, expert counts, every unit's
// gradient), the optimizer (exactly on identical gradients, closely after a whole step),
// next_logits, bad ids, and 40 steps of training on the repo's docs/ that must make the loss fall.
//
// Routing. The GPU's bf16 GEMMs move the gate's inputs by ~1e-3 relative, so a token whose k-th
// and (k+1)-th gate logits are closer than ~1e-3 may pick another expert on the GPU; the counts and
// the gradients would then differ for a legitimate reason. The strict comparisons therefore use
// Dims::skew's forced routing (the experts come from a hash of the positions and ids, identical on
// both sides, while the combine weights and the balancing loss still come from the gate), and the
// gate-routed comparison runs on a batch the CPU shows to have no near tie (every token's top-k
// logit gap >= kMinGateGap, about ten times the difference bf16 makes, measured on the CPU with
// bf16-rounded GEMM operands).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/permute.h"
#include "model/cuda/device_exchange.h"
#include "model/cuda/device_params.h"
#include "model/cuda/moe_gpt_cuda.h"
#include "model/cuda/optimizer_cuda.h"
#include "model/cuda/pinned_snapshot.h"
#include "model/local_exchange.h"
#include "model/model_cuda_checks.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"

using namespace sal;
using namespace sal::model;
using namespace sal::model::gpu_checks;
using sal::test::gpu::ctx;
using sal::test::gpu::rel_error;
using sal::test::gpu::to_device;
using sal::test::gpu::to_host;

namespace {

constexpr double kGradTol = 3e-2;     // each unit's gradient, relative 2-norm
constexpr double kMinGateGap = 5e-3;  // see the top of the file

// L 2, d 64, 4 heads, E 4, top-2, T 32, vocab 256; forced routing on request.
Dims small_dims(bool forced_routing) {
  Dims d;
  d.layers = 2, d.d = 64, d.heads = 4, d.experts = 4, d.top_k = 2, d.seq_len = 32, d.vocab = 256;
  if (forced_routing) d.skew = 3.0f, d.hot_experts = 1;
  return d;
}

// As if another worker had routed `tokens` tokens: fixed counts and probability sums are added to
// the global statistics (the same on the CPU and the GPU side).
struct OtherWorker {
  std::vector<double> counts, prob_sums;
  double tokens = 0;
  void add(std::vector<double>& c, std::vector<double>& p, double& t) const {
    for (size_t e = 0; e < c.size(); ++e) c[e] += counts[e], p[e] += prob_sums[e];
    t += tokens;
  }
};

struct CpuWithOther : LocalExchange {
  CpuWithOther(Params& p, OtherWorker o) : LocalExchange(p), o_(std::move(o)) {}
  Status global_stats(int, std::vector<double>& c, std::vector<double>& p, double& t) override {
    o_.add(c, p, t);
    return {};
  }
  OtherWorker o_;
};

struct GpuWithOther : DeviceExchange {
  GpuWithOther(DeviceParams& p, OtherWorker o) : local_(p), o_(std::move(o)) {}
  Status global_stats(int, std::vector<double>& c, std::vector<double>& p, double& t) override {
    o_.add(c, p, t);
    return {};
  }
  Status forward(int l, const DeviceRouting& r, const float* x, float* out) override {
    return local_.forward(l, r, x, out);
  }
  Status backward(int l, const DeviceRouting& r, const float* d_out, float* dx, float* d_w) override {
    return local_.backward(l, r, d_out, dx, d_w);
  }
  LocalDeviceExchange local_;
  OtherWorker o_;
};

// Round to nearest even, as the device's bf16 copies are made.
uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// The unit's bf16 copy on the device equals its values rounded.
void check_bf16_copy(DeviceUnit& u) {
  REQUIRE(u.has_bf16());
  std::vector<float> w = to_host(u.w);
  std::vector<kc::Bf16> w16 = to_host(u.w16);
  REQUIRE(w16.size() == w.size());
  size_t bad = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, &w16[i], 2);
    bad += got != bf16_bits(w[i]);
  }
  CHECK(bad == 0);
}

void fill_random(std::vector<float>& v, std::mt19937& rng, float scale) {
  std::normal_distribution<float> n(0.0f, scale);
  for (auto& x : v) x = n(rng);
}

}  // namespace

TEST_CASE("DeviceParams keeps every unit's values, gradient and moments and gives them back") {
  Dims d = small_dims(false);
  Params p = Params::create(d, 3, Params::all_experts(d));
  std::mt19937 rng(4);
  for (Unit* u : p.units()) {
    fill_random(u->g, rng, 1.0f);
    fill_random(u->m, rng, 0.1f);
    for (auto& v : u->v) v = std::fabs(std::normal_distribution<float>(0.0f, 0.01f)(rng));
  }
  auto dp = on_device(p);
  CHECK(dp->parameter_count() == p.parameter_count());
  CHECK_FALSE(dp->bf16_head());  // vocab 256: the head is fp32
  CHECK_FALSE(dp->embedding().has_bf16());
  CHECK_FALSE(dp->gate(0).has_bf16());
  check_bf16_copy(dp->dense(1));
  check_bf16_copy(*dp->expert(1, 2));
  REQUIRE_OK(dp->upload(p, kGrads));

  Params back = Params::create(d, 99, Params::all_experts(d));  // other values everywhere
  REQUIRE_OK(dp->download(back, kAllParts));
  auto a = p.units(), b = back.units();
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i]->id.name());
    CHECK(b[i]->w == a[i]->w);
    CHECK(b[i]->g == a[i]->g);
    CHECK(b[i]->m == a[i]->m);
    CHECK(b[i]->v == a[i]->v);
  }

  REQUIRE_OK(dp->zero_grads());
  REQUIRE_OK(dp->download(back, kGrads));
  for (Unit* u : back.units()) CHECK(std::all_of(u->g.begin(), u->g.end(), [](float x) { return x == 0.0f; }));

  // migration: an expert leaves, the host form without it matches, it comes back
  dp->remove_expert(1, 3);
  CHECK(dp->expert(1, 3) == nullptr);
  CHECK(dp->held_experts().size() == size_t(d.layers * d.experts - 1));
  std::vector<std::pair<int, int>> fewer = Params::all_experts(d);
  fewer.pop_back();
  Params partial = Params::create(d, 3, fewer);
  REQUIRE_OK(dp->download(partial, kValues));
  CHECK_FALSE(dp->download(back, kValues).ok());  // the host holds an expert the device does not
  REQUIRE_OK(dp->add_expert(*p.expert(1, 3)));
  Unit e13;
  REQUIRE_OK(dp->download_unit(UnitId{UnitKind::expert, 1, 3}, e13, kAllParts));
  CHECK(e13.w == p.expert(1, 3)->w);
  CHECK(e13.m == p.expert(1, 3)->m);
  CHECK(std::all_of(e13.g.begin(), e13.g.end(), [](float x) { return x == 0.0f; }));
  check_bf16_copy(*dp->expert(1, 3));

  // a bf16 LM head keeps a bf16 copy of the embedding
  auto dp16 = on_device(p, LmHead::bf16);
  CHECK(dp16->bf16_head());
  check_bf16_copy(dp16->embedding());
}

TEST_CASE("LocalDeviceExchange computes the CPU experts, their combine and every gradient") {
  struct Case {
    int d;
    kc::GroupedGemmMode mode;
  };
  for (Case c : {Case{64, kc::GroupedGemmMode::grouped}, Case{64, kc::GroupedGemmMode::per_group},
                 Case{34, kc::GroupedGemmMode::grouped}}) {  // d 34: per-expert fallback, unaligned rows
    CAPTURE(c.d);
    CAPTURE(int(c.mode));
    Dims d = small_dims(false);
    d.layers = 1, d.d = c.d, d.heads = 2;
    const int N = 50, K = d.top_k, E = d.experts, D = d.d;
    Params p = Params::create(d, 5, Params::all_experts(d));
    std::mt19937 rng(6);
    // every token picks two distinct experts among 0..2: expert 3 gets nothing
    std::vector<int32_t> idx(size_t(N) * K);
    std::vector<float> w(idx.size());
    for (int t = 0; t < N; ++t) {
      int a = int(rng() % 3), b = (a + 1 + int(rng() % 2)) % 3;
      idx[size_t(t) * K] = a, idx[size_t(t) * K + 1] = b;
      w[size_t(t) * K] = 0.2f + 0.6f * float(rng() % 1000) / 1000.0f, w[size_t(t) * K + 1] = 0.3f;
    }
    std::vector<float> x = sal::test::gpu::randn(size_t(N) * D, 7), dy = sal::test::gpu::randn(size_t(N) * D, 8);

    // CPU: the exchange's rows, combined and differentiated as moe_gpt.cpp does
    p.zero_grads();
    LocalExchange cex(p);
    std::vector<float> rows(size_t(N) * K * D), dx_rows(rows.size()), d_rows(rows.size());
    REQUIRE_OK(cex.forward(0, x.data(), Routing{N, K, idx}, rows.data()));
    std::vector<float> out(size_t(N) * D, 0.0f), dx(size_t(N) * D, 0.0f), dw(idx.size());
    for (int t = 0; t < N; ++t)
      for (int j = 0; j < K; ++j) {
        size_t a = size_t(t) * K + j;
        double dot = 0;
        for (int i = 0; i < D; ++i) {
          out[size_t(t) * D + i] += w[a] * rows[a * D + i];
          d_rows[a * D + i] = w[a] * dy[size_t(t) * D + i];
          dot += double(dy[size_t(t) * D + i]) * rows[a * D + i];
        }
        dw[a] = float(dot);
      }
    REQUIRE_OK(cex.backward(0, d_rows.data(), dx_rows.data()));
    for (size_t a = 0; a < idx.size(); ++a)
      for (int i = 0; i < D; ++i) dx[(a / K) * D + i] += dx_rows[a * D + i];

    // GPU
    auto dp = on_device(p);
    auto d_idx = to_device(idx);
    auto d_w = to_device(w);
    auto d_x = to_device(x);
    auto d_dy = to_device(dy);
    auto counts = sal::test::gpu::poisoned<uint32_t>(size_t(E));
    SAL_CHECK_OK(kc::count_assignments(ctx(), d_idx.get(), N, K, E, counts.get()));
    auto g_out = sal::test::gpu::poisoned<float>(out.size());
    auto g_dx = sal::test::gpu::poisoned<float>(dx.size());
    auto g_dw = sal::test::gpu::poisoned<float>(dw.size());
    LocalDeviceExchange gex(*dp, c.mode);
    DeviceRouting r{N, K, d_idx.get(), d_w.get(), counts.get()};
    REQUIRE_OK(gex.forward(0, r, d_x.get(), g_out.get()));
    REQUIRE_OK(gex.backward(0, r, d_dy.get(), g_dx.get(), g_dw.get()));
    CHECK(rel_error(to_host(g_out), out) <= sal::test::gpu::kBf16Tol);
    CHECK(rel_error(to_host(g_dx), dx) <= 2 * sal::test::gpu::kBf16Tol);
    CHECK(rel_error(to_host(g_dw), dw) <= sal::test::gpu::kBf16Tol);
    for (int e = 0; e < E; ++e) {
      CAPTURE(e);
      Unit got;
      REQUIRE_OK(dp->download_unit(UnitId{UnitKind::expert, 0, e}, got, kGrads));
      const std::vector<float>& want = p.expert(0, e)->g;
      if (e == 3)
        CHECK(std::all_of(got.g.begin(), got.g.end(), [](float v) { return v == 0.0f; }));  // no rows: untouched
      else
        CHECK(rel_error(got.g, want) <= 2 * sal::test::gpu::kBf16Tol);
    }
    // an expert with tokens that is not held here is an error, as on the CPU
    dp->remove_expert(0, 1);
    LocalDeviceExchange gex2(*dp, c.mode);
    auto s = gex2.forward(0, r, d_x.get(), g_out.get());
    CHECK_FALSE(s.ok());
    if (!s.ok()) CHECK(s.error().message().find("not held") != std::string::npos);
  }
}

TEST_CASE("a GPU step with forced routing matches the CPU step: losses, expert counts, every gradient") {
  Dims d = small_dims(true);
  Params cpu = Params::create(d, 1, Params::all_experts(d));
  auto gpu = on_device(cpu);
  Corpus c = docs_corpus(d.seq_len);
  Batch b = make_batch(c, 11, 0, 0, 4, d.seq_len);
  StepStats cs = cpu_step(cpu, b, 4 * d.seq_len);
  StepStats gs = gpu_step(*gpu, b, 4 * d.seq_len);
  check_step(cs, gs, cpu, *gpu, kGradTol);
  // gradients accumulate: a second step without zeroing doubles them
  {
    LocalDeviceExchange ex(*gpu);
    MoeGptCuda m(*gpu);
    REQUIRE(m.step(b, 4 * d.seq_len, ex).ok());
    Params twice = cpu;
    REQUIRE_OK(gpu->download(twice, kGrads));
    for (Unit* u : cpu.units())
      for (auto& g : u->g) g *= 2.0f;
    auto want = cpu.units(), have = twice.units();
    for (size_t i = 0; i < want.size(); ++i) CHECK(rel_error(have[i]->g, want[i]->g) <= kGradTol);
  }
}

TEST_CASE("a GPU step routed by the gate matches the CPU step on a batch without near ties") {
  Dims d = small_dims(false);
  Params cpu = Params::create(d, 1, Params::all_experts(d));
  Corpus c = docs_corpus(d.seq_len);
  const int chosen = batch_without_near_ties(cpu, c, 1, kMinGateGap);
  Batch b = make_batch(c, 11, uint64_t(chosen), 0, 1, d.seq_len);
  StepStats cs = cpu_step(cpu, b, d.seq_len);
  auto gpu = on_device(cpu);
  StepStats gs = gpu_step(*gpu, b, d.seq_len);
  check_step(cs, gs, cpu, *gpu, kGradTol);
}

TEST_CASE("global statistics from the exchange drive the balancing loss as on the CPU") {
  Dims d = small_dims(true);
  d.aux_weight = 0.05f;
  Params cpu = Params::create(d, 2, Params::all_experts(d));
  auto gpu = on_device(cpu);
  Corpus c = docs_corpus(d.seq_len);
  Batch b = make_batch(c, 11, 3, 0, 2, d.seq_len);
  // another worker with 64 tokens whose routing leans on expert 0
  OtherWorker other{{60, 30, 20, 18}, {25.0, 15.0, 12.0, 12.0}, 64};
  CpuWithOther cex(cpu, other);
  GpuWithOther gex(*gpu, other);
  StepStats cs = cpu_step(cpu, b, 2 * 64, &cex);
  StepStats gs = gpu_step(*gpu, b, 2 * 64, kc::GroupedGemmMode::grouped, &gex);
  check_step(cs, gs, cpu, *gpu, kGradTol);
}

TEST_CASE("per-expert GEMMs and a bf16 LM head compute the same step") {
  Dims d = small_dims(true);
  Params cpu = Params::create(d, 4, Params::all_experts(d));
  auto gpu = on_device(cpu, LmHead::bf16);
  REQUIRE(gpu->bf16_head());
  Corpus c = docs_corpus(d.seq_len);
  Batch b = make_batch(c, 11, 1, 0, 4, d.seq_len);
  StepStats cs = cpu_step(cpu, b, 4 * d.seq_len);
  StepStats gs = gpu_step(*gpu, b, 4 * d.seq_len, kc::GroupedGemmMode::per_group);
  check_step(cs, gs, cpu, *gpu, kGradTol);
}

TEST_CASE("an odd d_model (no vector or grouped paths) still matches the CPU step") {
  Dims d = small_dims(true);
  d.d = 34, d.heads = 2;  // head size 17; d % 4 != 0 and d % 8 != 0
  Params cpu = Params::create(d, 6, Params::all_experts(d));
  auto gpu = on_device(cpu);
  Corpus c = docs_corpus(d.seq_len);
  Batch b = make_batch(c, 11, 2, 0, 3, d.seq_len);
  StepStats cs = cpu_step(cpu, b, 3 * d.seq_len);
  StepStats gs = gpu_step(*gpu, b, 3 * d.seq_len);
  check_step(cs, gs, cpu, *gpu, kGradTol);
}

TEST_CASE("the GPU optimizer step equals the CPU's on the same gradients") {
  Dims d = small_dims(true);
  Corpus c = docs_corpus(d.seq_len);
  OptimConfig oc;
  oc.lr = 3e-3, oc.warmup = 5, oc.total_steps = 50;
  // a CPU state with moments (one update done) and fresh gradients
  Params cpu = Params::create(d, 8, Params::all_experts(d));
  cpu_step(cpu, make_batch(c, 11, 0, 0, 2, d.seq_len), 2 * d.seq_len);
  apply_adamw(cpu, oc, learning_rate(oc, 0), 1.0, 1);
  cpu_step(cpu, make_batch(c, 11, 1, 0, 2, d.seq_len), 2 * d.seq_len);

  for (double clip : {0.01, 1e9}) {  // the norm is far above 0.01 (clipped) and below 1e9 (not)
    CAPTURE(clip);
    oc.clip = clip;
    Params want = cpu;
    auto gpu = on_device(want);
    REQUIRE_OK(gpu->upload(want, kAllParts));
    double norm2 = 0;
    for (Unit* u : want.units()) norm2 += grad_sum_squares(*u);
    const int64_t step = 7;  // past the warmup: the cosine part of the schedule
    apply_adamw(want, oc, learning_rate(oc, step), clip_scale(oc, std::sqrt(norm2)), step + 1);
    OptimizerCuda opt(*gpu, oc);
    REQUIRE_OK(opt.step(step));
    auto norm = opt.last_norm();
    REQUIRE(norm.ok());
    CHECK(rel(*norm, std::sqrt(norm2)) <= 1e-9);
    Params got = cpu;
    REQUIRE_OK(gpu->download(got, kAllParts));
    auto a = want.units(), b = got.units();
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(a[i]->id.name());
      CHECK(rel_error(b[i]->w, a[i]->w) <= 1e-6);
      CHECK(rel_error(b[i]->m, a[i]->m) <= 1e-6);
      CHECK(rel_error(b[i]->v, a[i]->v) <= 1e-6);
      CHECK(rel_error(b[i]->g, a[i]->g) <= 1e-6);  // the clipped gradients
    }
    check_bf16_copy(gpu->dense(0));
    check_bf16_copy(*gpu->expert(1, 1));
  }

  // apply_adamw with a host scale, as the Trainer would call it; and the per-unit sums of squares
  Params want = cpu;
  auto gpu = on_device(want);
  REQUIRE_OK(gpu->upload(want, kAllParts));
  OptimizerCuda opt(*gpu, oc);
  auto sums = opt.unit_grad_sum_squares();
  REQUIRE(sums.ok());
  auto us = want.units();
  REQUIRE(sums->size() == us.size());
  for (size_t i = 0; i < us.size(); ++i) CHECK(rel((*sums)[i], grad_sum_squares(*us[i])) <= 1e-9);
  apply_adamw(want, oc, 1e-3, 0.5, 3);
  REQUIRE_OK(opt.apply_adamw(1e-3, 0.5, 3));
  Params got = cpu;
  REQUIRE_OK(gpu->download(got, kValues | kMoments));
  auto a = want.units(), b = got.units();
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i]->id.name());
    CHECK(rel_error(b[i]->w, a[i]->w) <= 1e-6);
    CHECK(rel_error(b[i]->m, a[i]->m) <= 1e-6);
    CHECK(rel_error(b[i]->v, a[i]->v) <= 1e-6);
  }
}

TEST_CASE("a whole step and an optimizer step on both keep the parameters close") {
  Dims d = small_dims(true);
  Corpus c = docs_corpus(d.seq_len);
  Params start = Params::create(d, 9, Params::all_experts(d));
  Params cpu = start;
  auto gpu = on_device(start);
  OptimConfig oc;
  oc.lr = 1e-3, oc.warmup = 0, oc.total_steps = 0;  // constant rate
  Batch b = make_batch(c, 11, 5, 0, 4, d.seq_len);
  cpu_step(cpu, b, 4 * d.seq_len);
  double norm2 = 0;
  for (Unit* u : cpu.units()) norm2 += grad_sum_squares(*u);
  apply_adamw(cpu, oc, learning_rate(oc, 0), clip_scale(oc, std::sqrt(norm2)), 1);
  gpu_step(*gpu, b, 4 * d.seq_len);
  OptimizerCuda opt(*gpu, oc);
  REQUIRE_OK(opt.step(0));
  Params got = start;
  REQUIRE_OK(gpu->download(got, kValues));
  // Adam's first update is about lr * sign(g): elements whose gradient is within the bf16 error of
  // zero may move the other way (at most 2 lr apart), the rest agree.
  auto s = start.units(), a = cpu.units(), g = got.units();
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i]->id.name());
    double max_diff = 0, num = 0, den = 0;
    for (size_t j = 0; j < a[i]->w.size(); ++j) {
      double ua = double(a[i]->w[j]) - s[i]->w[j], ug = double(g[i]->w[j]) - s[i]->w[j];
      max_diff = std::max(max_diff, std::fabs(ua - ug));
      num += (ua - ug) * (ua - ug);
      den += ua * ua;
    }
    CHECK(max_diff <= 2.1 * oc.lr);
    CHECK(std::sqrt(num / std::max(den, 1e-30)) <= 0.3);
    CHECK(rel_error(g[i]->w, a[i]->w) <= 2e-2);
  }
}

// Two DeviceParams with the same state run the same updates; on one, a snapshot is begun between
// them. The copy must see the first update (it is ordered after it: the `taken` event) and not the
// second (the second waits for `copied`): the pinned units equal, bit for bit, a synchronous
// download of the twin after its first update. Sized so that a missing wait would show: the copy
// (~60 MB to host memory, milliseconds) is far slower than the update kernels, and a few GB of
// memsets queued first keep the first update from finishing before begin() enqueues the copy.
namespace {

bool same_state(const UnitView& u, const Unit& want) {
  return u.size == want.w.size() && std::equal(u.w, u.w + u.size, want.w.begin()) &&
         std::equal(u.m, u.m + u.size, want.m.begin()) && std::equal(u.v, u.v + u.size, want.v.begin());
}

// The model and optimizer state the snapshot cases start from: a small model with random gradients
// and moments.
Params snapshot_model() {
  Dims d;
  d.layers = 2, d.d = 256, d.heads = 4, d.experts = 4, d.top_k = 2, d.seq_len = 32, d.vocab = 256;
  Params p = Params::create(d, 5, Params::all_experts(d));
  std::mt19937 rng(6);
  for (Unit* u : p.units()) {
    fill_random(u->g, rng, 0.1f);
    fill_random(u->m, rng, 0.01f);
    for (auto& v : u->v) v = std::fabs(std::normal_distribution<float>(0.0f, 1e-4f)(rng));
  }
  return p;
}

OptimConfig snapshot_optim() {
  OptimConfig oc;
  oc.weight_decay = 0.1;
  return oc;
}

// A pinned snapshot, staged and copied as asked, begun between two AdamW updates: it holds exactly
// the state after the first (as a synchronous download of a twin), and the second ran after its copy.
void check_snapshot_between_updates(SnapshotCopy how) {
  const SnapshotStaging staging = how.staging;
  Params p = snapshot_model();
  const OptimConfig oc = snapshot_optim();

  // the twin: the state after the first update, then after the second, each by synchronous download
  auto twin = on_device(p);
  REQUIRE_OK(twin->upload(p, kAllParts));
  OptimizerCuda twin_opt(*twin, oc);
  Params after1 = p, after2 = p;
  REQUIRE_OK(twin_opt.apply_adamw(1e-3, 0.5, 2));
  REQUIRE_OK(twin->download(after1, kValues | kMoments));
  REQUIRE_OK(twin_opt.apply_adamw(1e-3, 0.5, 3));
  REQUIRE_OK(twin->download(after2, kValues | kMoments));
  CHECK(after1.embedding.w != after2.embedding.w);  // the second update changes the values
  twin.reset();

  auto gpu = on_device(p);
  REQUIRE_OK(gpu->upload(p, kAllParts));
  OptimizerCuda opt(*gpu, oc);
  auto snap = PinnedSnapshot::create(ctx(), how);
  REQUIRE_OK(snap);
  PinnedSnapshot& ps = **snap;
  CHECK(ps.in_flight() == 0);
  CHECK_FALSE(ps.finish(1).ok());  // nothing begun

  kc::Buffer<uint8_t> busy;
  const size_t busy_bytes = size_t(512) << 20;
  REQUIRE(busy.allocate(busy_bytes).ok());
  for (int i = 0; i < 8; ++i)
    REQUIRE(cudaMemsetAsync(busy.get(), i, busy_bytes, ctx().stream()) == cudaSuccess);
  REQUIRE_OK(opt.apply_adamw(1e-3, 0.5, 2));  // enqueued, not run yet
  auto ticket = ps.begin(*gpu, {});             // every unit
  REQUIRE_OK(ticket);
  CHECK(ps.in_flight() == 1);
  REQUIRE_OK(opt.apply_adamw(1e-3, 0.5, 3));  // must wait for the copy (or the staging) on the device
  auto units = ps.finish(*ticket);
  REQUIRE_OK(units);
  CHECK_FALSE(ps.finish(*ticket).ok());  // once
  CHECK(ps.in_flight() == 1);            // lent until the views go
  Params now = p;
  REQUIRE_OK(gpu->download(now, kValues | kMoments));

  auto want = after1.units(), later = after2.units(), have = now.units();
  REQUIRE(units->units.size() == want.size());
  size_t bad_snapshot = 0, bad_update = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const UnitView& u = units->units[i];
    CAPTURE(want[i]->id.name());
    REQUIRE(u.id == want[i]->id);
    bad_snapshot += !same_state(u, *want[i]);
    bad_update += have[i]->w != later[i]->w || have[i]->m != later[i]->m || have[i]->v != later[i]->v;
  }
  CHECK(bad_snapshot == 0);  // the state after the first update exactly
  CHECK(bad_update == 0);    // and the second update ran after the copy, as on the twin
  const size_t state_bytes = 3 * gpu->parameter_count() * sizeof(float);
  CHECK(ps.pinned_bytes() == state_bytes);
  if (staging == SnapshotStaging::host) {
    CHECK(ps.staging_bytes() == 0);
    CHECK(ps.staging_off_reason() == "SAL_SNAPSHOT_STAGING=host");
  } else {
    MESSAGE("device staging: " << ps.staging_bytes() << " bytes; off because: '" << ps.staging_off_reason() << "'");
    CHECK(ps.staging_bytes() == state_bytes);  // a small model on a big GPU: there is room
  }

  // a second snapshot while the first's views are held takes the second slot; a third is refused
  // until a slot comes back
  std::vector<UnitId> ids{UnitId{UnitKind::expert, 1, 3}, UnitId{UnitKind::embedding}, UnitId{UnitKind::gate, 0}};
  auto second = ps.begin(*gpu, ids);
  REQUIRE_OK(second);
  CHECK(ps.in_flight() == 2);
  auto refused = ps.begin(*gpu, ids);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("staging slots are in use") != std::string::npos);
  auto few = ps.finish(*second);
  REQUIRE_OK(few);
  REQUIRE(few->units.size() == 3);
  for (size_t i = 0; i < ids.size(); ++i) {
    CAPTURE(ids[i].name());
    Unit direct;
    REQUIRE_OK(gpu->download_unit(ids[i], direct, kValues | kMoments));
    CHECK(few->units[i].id == ids[i]);
    CHECK(same_state(few->units[i], direct));
  }
  size_t few_bytes = 0;
  for (const UnitId& id : ids) few_bytes += 3 * gpu->find(id)->size * sizeof(float);
  CHECK(ps.pinned_bytes() == state_bytes + few_bytes);  // slot 1 pinned, for its units, when slot 0 was found held
  few->keep.reset();
  CHECK(ps.in_flight() == 1);
  auto third = ps.begin(*gpu, ids);  // slot 1 again
  REQUIRE_OK(third);
  REQUIRE_OK(ps.finish(*third));
  CHECK(ps.in_flight() == 1);  // its views dropped at once
  // the first's views outlive the snapshot object: the pinned memory goes with the last view
  snap->reset();
  bad_snapshot = 0;
  for (size_t i = 0; i < want.size(); ++i) bad_snapshot += !same_state(units->units[i], *want[i]);
  CHECK(bad_snapshot == 0);
  units->keep.reset();

  auto again = PinnedSnapshot::create(ctx(), how);
  REQUIRE_OK(again);
  gpu->remove_expert(0, 2);
  auto missing = (*again)->begin(*gpu, {UnitId{UnitKind::expert, 0, 2}});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("layer0.expert2") != std::string::npos);
  CHECK((*again)->in_flight() == 0);
  REQUIRE(ctx().synchronize().ok());
}

}  // namespace

TEST_CASE("a snapshot staged on the device equals a synchronous download of the state it was taken at") {
  SUBCASE("copied to the host in 1 MB chunks, one at a time") {
    check_snapshot_between_updates(SnapshotCopy{SnapshotStaging::automatic, size_t(1) << 20});
  }
  SUBCASE("in the default chunks") { check_snapshot_between_updates(SnapshotCopy{}); }
  SUBCASE("in one copy") { check_snapshot_between_updates(SnapshotCopy{SnapshotStaging::automatic, 0}); }
}

TEST_CASE("a snapshot copied straight to pinned memory equals a synchronous download of the state it was taken at") {
  check_snapshot_between_updates(SnapshotCopy{SnapshotStaging::host});
}

// Paced copies leave a staged snapshot's units in the spare device buffer until finish(): a second
// snapshot begun before then must not stage over them (it goes straight to pinned memory), and both
// hold the state each was begun at.
TEST_CASE("a snapshot begun while the last one waits in the device staging does not overwrite it") {
  Params p = snapshot_model();
  const OptimConfig oc = snapshot_optim();
  const std::vector<UnitId> ids{UnitId{UnitKind::expert, 0, 1}, UnitId{UnitKind::embedding}};
  auto gpu = on_device(p);
  REQUIRE_OK(gpu->upload(p, kAllParts));
  OptimizerCuda opt(*gpu, oc);
  auto snap = PinnedSnapshot::create(ctx(), SnapshotCopy{SnapshotStaging::automatic, size_t(1) << 20});
  REQUIRE_OK(snap);
  PinnedSnapshot& ps = **snap;

  REQUIRE_OK(opt.apply_adamw(1e-3, 0.5, 2));
  Params after1 = p;
  REQUIRE_OK(gpu->download(after1, kValues | kMoments));
  auto first = ps.begin(*gpu, {});  // staged, waiting in the spare buffer
  REQUIRE_OK(first);
  REQUIRE_OK(opt.apply_adamw(1e-3, 0.5, 3));
  auto second = ps.begin(*gpu, ids);  // the spare is held: straight to pinned memory
  REQUIRE_OK(second);
  REQUIRE_OK(opt.apply_adamw(1e-3, 0.5, 4));  // waits for the second's copy
  REQUIRE(ctx().synchronize().ok());
  auto later = ps.finish(*second);
  REQUIRE_OK(later);
  auto earlier = ps.finish(*first);
  REQUIRE_OK(earlier);

  auto want = after1.units();
  REQUIRE(earlier->units.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += !same_state(earlier->units[i], *want[i]);
  CHECK(bad == 0);  // the first snapshot: the state after the first update, untouched by the second
  // the second: the state after the second update, which the third changed since
  Params twin = snapshot_model();
  auto check_gpu = on_device(twin);
  REQUIRE_OK(check_gpu->upload(twin, kAllParts));
  OptimizerCuda twin_opt(*check_gpu, oc);
  REQUIRE_OK(twin_opt.apply_adamw(1e-3, 0.5, 2));
  REQUIRE_OK(twin_opt.apply_adamw(1e-3, 0.5, 3));
  REQUIRE(later->units.size() == ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    CAPTURE(ids[i].name());
    Unit direct, now;
    REQUIRE_OK(check_gpu->download_unit(ids[i], direct, kValues | kMoments));
    REQUIRE_OK(gpu->download_unit(ids[i], now, kValues | kMoments));
    CHECK(same_state(later->units[i], direct));
    CHECK_FALSE(same_state(later->units[i], now));  // the third update ran after the copy
  }
  later->keep.reset();
  earlier->keep.reset();
  // the spare is free again: the next snapshot is staged
  auto third = ps.begin(*gpu, ids);
  REQUIRE_OK(third);
  REQUIRE_OK(ps.finish(*third));
  CHECK(ps.staging_bytes() == 3 * gpu->parameter_count() * sizeof(float));
  CHECK(ps.in_flight() == 0);
  REQUIRE(ctx().synchronize().ok());
}

TEST_CASE("SAL_SNAPSHOT_CHUNK_MB and SAL_SNAPSHOT_STAGING are read, and bad values named") {
  struct Env {
    const char* name;
    explicit Env(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
    ~Env() { unsetenv(name); }
  };
  {
    auto how = snapshot_copy_from_env();
    REQUIRE_OK(how);
    CHECK(how->chunk_bytes == SnapshotCopy::kDefaultChunkBytes);
    CHECK(how->staging == SnapshotStaging::automatic);
  }
  {
    Env c("SAL_SNAPSHOT_CHUNK_MB", "0"), s("SAL_SNAPSHOT_STAGING", "host");
    auto how = snapshot_copy_from_env();
    REQUIRE_OK(how);
    CHECK(how->chunk_bytes == 0);
    CHECK(how->staging == SnapshotStaging::host);
  }
  for (const char* bad : {"-1", "8MB", "5000", "", "1.5"}) {
    CAPTURE(bad);
    Env c("SAL_SNAPSHOT_CHUNK_MB", bad);
    auto how = snapshot_copy_from_env();
    if (std::string(bad).empty()) {
      CHECK(how.ok());  // unset or empty: the default
      continue;
    }
    REQUIRE_FALSE(how.ok());
    CHECK(how.error().message().find("SAL_SNAPSHOT_CHUNK_MB") != std::string::npos);
  }
}

TEST_CASE("next_logits agrees with the CPU model") {
  Dims d = small_dims(true);
  Params cpu = Params::create(d, 10, Params::all_experts(d));
  auto gpu = on_device(cpu);
  Corpus c = docs_corpus(d.seq_len);
  for (int len : {1, 20, d.seq_len}) {
    CAPTURE(len);
    const std::vector<uint32_t> window = c.copy_tokens(100, size_t(len));
    std::vector<int32_t> ids(window.begin(), window.end());
    LocalExchange cex(cpu);
    MoeGpt cm(cpu);
    auto want = cm.next_logits(ids, cex);
    REQUIRE(want.ok());
    LocalDeviceExchange gex(*gpu);
    MoeGptCuda gm(*gpu);
    auto got = gm.next_logits(ids, gex);
    REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message()));
    REQUIRE(got->size() == size_t(d.vocab));
    CHECK(rel_error(*got, *want) <= sal::test::gpu::kBf16Tol);
  }
  LocalDeviceExchange gex(*gpu);
  MoeGptCuda gm(*gpu);
  CHECK_FALSE(gm.next_logits({}, gex).ok());
  CHECK_FALSE(gm.next_logits(std::vector<int32_t>(size_t(d.seq_len) + 1, 65), gex).ok());
}

TEST_CASE("ids or targets outside the vocabulary make the GPU step fail, and the next step works") {
  Dims d = small_dims(true);
  Params cpu = Params::create(d, 11, Params::all_experts(d));
  auto gpu = on_device(cpu);
  Corpus c = docs_corpus(d.seq_len);
  Batch b = make_batch(c, 11, 0, 0, 2, d.seq_len);
  LocalDeviceExchange ex(*gpu);
  MoeGptCuda m(*gpu);
  Batch bad_id = b;
  bad_id.inputs[5] = 300;
  CHECK_FALSE(m.step(bad_id, 2 * d.seq_len, ex).ok());
  Batch bad_target = b;
  bad_target.targets[7] = 999;
  CHECK_FALSE(m.step(bad_target, 2 * d.seq_len, ex).ok());
  REQUIRE_OK(gpu->zero_grads());
  auto ok = m.step(b, 2 * d.seq_len, ex);
  REQUIRE(ok.ok());
  StepStats cs = cpu_step(cpu, b, 2 * d.seq_len);
  CHECK(rel(ok->ce_sum, cs.ce_sum) <= kLossTol);
}

TEST_CASE("40 GPU steps on the repo's docs make the loss fall as on the CPU") {
  Dims d = small_dims(false);
  Corpus c = docs_corpus(d.seq_len);
  OptimConfig oc;
  oc.lr = 3e-3, oc.warmup = 5, oc.total_steps = 40;
  Params cpu = Params::create(d, 5, Params::all_experts(d));
  check_learns_like_cpu(train_both(cpu, c, oc, 8, 40));
}
