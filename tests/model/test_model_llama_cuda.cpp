// test_model_llama_cuda.cpp — the moe-llama model on one GPU (MoeLlamaCuda, engine/model/cuda)
// against the CPU model (model::MoeLlama + model::LocalExchange) on identical parameters, in two
// configurations that between them cover every option the GPU builds (softmax and sigmoid
// routers, renormalised top-k, grouped- and multi-query attention, QK-norm, attention biases,
// shared experts gated and not, fine-grained experts, tied and untied heads, the z-loss): a whole
// step (losses, expert counts, every unit's gradient) on a batch without near ties in the router,
// the balancing loss driven by another worker's statistics, a bf16 LM head, next_logits, bad ids,
// the routing bias refused by key, and 40 steps on the repo's docs/ that must make the loss fall
// as on the CPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/cuda/device_exchange.h"
#include "model/cuda/device_model.h"
#include "model/cuda/device_params.h"
#include "model/cuda/optimizer_cuda.h"
#include "model/local_exchange.h"
#include "model/model_cuda_checks.h"
#include "model/optimizer.h"

using namespace sal;
using namespace sal::model;
using namespace sal::model::gpu_checks;
using sal::test::gpu::rel_error;

namespace {

constexpr double kGradTol = 3e-2;     // each unit's gradient, relative 2-norm
constexpr double kMinGateGap = 5e-3;  // as test_model_cuda.cpp's: ten times what bf16 moves

// Softmax router, 4 query heads over 2 key/value heads with QK-norm, a gated shared expert,
// an untied head, a z-loss (test_model_llama.cpp's `grouped`, at GPU-friendly widths).
Dims grouped() {
  Dims d;
  d.family = ModelFamily::llama;
  d.layers = 2, d.d = 64, d.heads = 4, d.kv_dim = 32, d.experts = 4, d.top_k = 2, d.seq_len = 32, d.vocab = 256;
  d.expert_ffn = 48, d.shared_ffn = 32, d.tied_head = false, d.qk_norm = true, d.shared_gate = true;
  d.aux_weight = 0.05f, d.z_loss_weight = 0.01f;
  return d;
}

// Sigmoid router, renormalised top-3 of 8 fine-grained experts, one key/value head with attention
// biases, an ungated shared expert, a tied head.
Dims fine() {
  Dims d;
  d.family = ModelFamily::llama;
  d.layers = 1, d.d = 32, d.heads = 2, d.kv_dim = 16, d.experts = 8, d.top_k = 3, d.seq_len = 12, d.vocab = 256;
  d.expert_ffn = 16, d.shared_ffn = 16, d.sigmoid_router = true, d.norm_topk = true, d.aux_weight = 0.05f;
  d.z_loss_weight = 0.02f, d.attn_bias = true, d.rope_theta = 500;
  return d;
}

// A step of both models on the first batch of `sequences` without a near tie in the router.
void check_routed_step(const Dims& d, int sequences, LmHead head = LmHead::automatic) {
  Params cpu = Params::create(d, 1, Params::all_experts(d));
  Corpus c = docs_corpus(d.seq_len);
  const int chosen = batch_without_near_ties(cpu, c, sequences, kMinGateGap);
  Batch b = make_batch(c, 11, uint64_t(chosen), 0, sequences, d.seq_len);
  const int64_t global = int64_t(sequences) * d.seq_len;
  StepStats cs = cpu_step(cpu, b, global);
  auto gpu = on_device(cpu, head);
  StepStats gs = gpu_step(*gpu, b, global, kc::GroupedGemmMode::per_group);
  check_step(cs, gs, cpu, *gpu, kGradTol);
}

}  // namespace

TEST_CASE("a moe-llama GPU step matches the CPU step: softmax router, grouped-query attention, QK-norm, gated shared expert, untied head") {
  check_routed_step(grouped(), 1);
}

TEST_CASE("a moe-llama GPU step matches the CPU step: sigmoid router, renormalised top-3 of 8, one key/value head, attention biases, tied head") {
  check_routed_step(fine(), 1);
}

TEST_CASE("a moe-llama GPU step with a bf16 LM head matches the CPU step") {
  Dims d = grouped();
  d.tied_head = true;
  check_routed_step(d, 1, LmHead::bf16);
}

TEST_CASE("another worker's statistics drive moe-llama's balancing loss as on the CPU") {
  Dims d = fine();
  Params cpu = Params::create(d, 2, Params::all_experts(d));
  Corpus c = docs_corpus(d.seq_len);
  const int chosen = batch_without_near_ties(cpu, c, 1, kMinGateGap);
  Batch b = make_batch(c, 11, uint64_t(chosen), 0, 1, d.seq_len);
  struct Other {
    void add(std::vector<double>& cn, std::vector<double>& p, double& t) const {
      for (size_t e = 0; e < cn.size(); ++e) cn[e] += double(3 * e + 1), p[e] += 0.5 + 0.1 * double(e);
      t += 40;
    }
  };
  struct CpuOther : LocalExchange {
    using LocalExchange::LocalExchange;
    Status global_stats(int, std::vector<double>& cn, std::vector<double>& p, double& t) override {
      Other{}.add(cn, p, t);
      return {};
    }
  };
  struct GpuOther : LocalDeviceExchange {
    using LocalDeviceExchange::LocalDeviceExchange;
    Status global_stats(int, std::vector<double>& cn, std::vector<double>& p, double& t) override {
      Other{}.add(cn, p, t);
      return {};
    }
  };
  CpuOther cex(cpu);
  StepStats cs = cpu_step(cpu, b, d.seq_len + 40, &cex);
  auto gpu = on_device(cpu);
  GpuOther gex(*gpu);
  StepStats gs = gpu_step(*gpu, b, d.seq_len + 40, kc::GroupedGemmMode::per_group, &gex);
  check_step(cs, gs, cpu, *gpu, kGradTol);
}

TEST_CASE("moe-llama's next_logits agrees with the CPU model's last position") {
  for (const Dims& d : {grouped(), fine()}) {
    Params cpu = Params::create(d, 10, Params::all_experts(d));
    auto gpu = on_device(cpu);
    Corpus c = docs_corpus(d.seq_len);
    for (int len : {1, 7, d.seq_len}) {
      CAPTURE(len);
      const std::vector<uint32_t> window = c.copy_tokens(100, size_t(len));
      std::vector<int32_t> ids(window.begin(), window.end());
      LocalExchange cex(cpu);
      auto cm = make_model(cpu);
      auto all = cm->logits(ids, 1, len, cex);
      REQUIRE(all.ok());
      std::vector<float> want(all->end() - d.vocab, all->end());
      LocalDeviceExchange gex(*gpu);
      auto gm = make_device_model(*gpu);
      REQUIRE(gm.ok());
      auto got = (*gm)->next_logits(ids, gex);
      REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message()));
      CHECK(rel_error(*got, want) <= sal::test::gpu::kBf16Tol);
    }
  }
}

TEST_CASE("moe-llama on the GPU: bad ids fail the step and the next works, the routing bias is refused by key") {
  Dims d = fine();
  Params cpu = Params::create(d, 3, Params::all_experts(d));
  auto gpu = on_device(cpu);
  LocalDeviceExchange ex(*gpu);
  auto m = make_device_model(*gpu);
  REQUIRE(m.ok());
  Corpus c = docs_corpus(d.seq_len);
  Batch b = make_batch(c, 11, 0, 0, 1, d.seq_len);
  Batch bad = b;
  bad.inputs[3] = d.vocab + 5;
  auto r = (*m)->step(bad, d.seq_len, ex);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("outside the vocabulary") != std::string::npos);
  CHECK((*m)->step(b, d.seq_len, ex).ok());
  Dims biased = d;
  biased.router_bias = true, biased.bias_update = 1e-3f;
  Params pb = Params::create(biased, 3, Params::all_experts(biased));
  auto gb = on_device(pb);
  auto refused = make_device_model(*gb);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("model.bias_update") != std::string::npos);
}

TEST_CASE("frozen units on the device: gradients pass through them, the norm and the update leave them out, as on the CPU") {
  Dims d = fine();
  Params cpu = Params::create(d, 4, Params::all_experts(d));
  // frozen as a sparse window's replay freezes them: a gate, an expert, the dense unit
  for (Unit* u : cpu.units())
    u->frozen = u->id.kind == UnitKind::gate || u->id.kind == UnitKind::dense ||
                (u->id.kind == UnitKind::expert && u->id.expert == 1);
  Corpus c = docs_corpus(d.seq_len);
  const int chosen = batch_without_near_ties(cpu, c, 1, kMinGateGap);
  Batch b = make_batch(c, 11, uint64_t(chosen), 0, 1, d.seq_len);
  const Params before = cpu;
  auto gpu = on_device(cpu);
  StepStats cs = cpu_step(cpu, b, d.seq_len);
  StepStats gs = gpu_step(*gpu, b, d.seq_len, kc::GroupedGemmMode::per_group);
  CHECK(rel(gs.ce_sum, cs.ce_sum) <= kLossTol);
  // each unit's sum of squares: 0 for the frozen ones (no gradient, as the CPU computes none), the
  // others the CPU's (the gradient flowed through the frozen units below them)
  OptimConfig oc;
  OptimizerCuda opt(*gpu, oc);
  auto sums = opt.unit_grad_sum_squares();
  REQUIRE(sums.ok());
  auto units = cpu.units();
  REQUIRE(sums->size() == units.size());
  double cpu_norm2 = 0, gpu_norm2 = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    CAPTURE(units[i]->id.name());
    const double want = grad_sum_squares(*units[i]);
    cpu_norm2 += want, gpu_norm2 += (*sums)[i];
    if (units[i]->frozen) {
      CHECK(want == 0.0);
      CHECK((*sums)[i] == 0.0);
    } else {
      CHECK(rel((*sums)[i], want) <= 2 * kGradTol);
    }
  }
  CHECK(rel(std::sqrt(gpu_norm2), std::sqrt(cpu_norm2)) <= kGradTol);
  // the update: frozen units keep their values bit for bit, the others move as the CPU's do
  const double lr = 1e-3;
  apply_adamw(cpu, oc, lr, 1.0, 1);
  REQUIRE_OK(opt.apply_adamw(lr, 1.0, 1));
  Params after = cpu;
  REQUIRE_OK(gpu->download(after, kValues));
  auto got = after.units();
  auto old = const_cast<Params&>(before).units();
  for (size_t i = 0; i < units.size(); ++i) {
    CAPTURE(units[i]->id.name());
    if (units[i]->frozen) {
      CHECK(got[i]->w == old[i]->w);
      continue;
    }
    std::vector<float> moved_gpu(got[i]->w.size()), moved_cpu(got[i]->w.size());
    for (size_t k = 0; k < moved_gpu.size(); ++k) {
      moved_gpu[k] = got[i]->w[k] - old[i]->w[k];
      moved_cpu[k] = units[i]->w[k] - old[i]->w[k];
    }
    CHECK(rel_error(moved_gpu, moved_cpu) <= 0.1);  // Adam's first step is about lr * sign(g)
  }
}

TEST_CASE("40 moe-llama GPU steps on the repo's docs make the loss fall as on the CPU") {
  Dims d = grouped();
  Corpus c = docs_corpus(d.seq_len);
  OptimConfig oc;
  oc.lr = 3e-3, oc.warmup = 5, oc.total_steps = 40;
  Params cpu = Params::create(d, 5, Params::all_experts(d));
  check_learns_like_cpu(train_both(cpu, c, oc, 8, 40));
}
