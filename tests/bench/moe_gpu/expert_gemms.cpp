// expert_gemms.cpp — section (d) of bench_moe_gpu: the expert GEMMs alone, without any epilogue,
// as a share of the bf16 matmul peak of (a), at three row counts per expert (512, 2 048, 8 192:
// public grouped GEMMs reach 16-25 % of peak near 512 rows per expert and 64-66 % at large counts).
// Per model (d, E of (b)), the six products of one expert MLP forward + backward, for every expert
// in turn, as the per_group and fused modes issue them (one cuBLAS call per expert and product):
//   x W1, a W2                         (forward, bf16 out)
//   a^T dout (dW2 += , fp32), dout W2^T (bf16 out), x^T dh (dW1 +=, fp32), dh W1^T (fp32 out)
// FLOPs: 6 * 2 * rows * d * 4d per expert. What (b)'s "experts" column adds on top of these is the
// epilogues (bias, GELU, its derivative, conversions) and the column sums of the bias gradients.
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/cuda/gemm.h"
#include "tests/bench/moe_gpu/bench_util.h"
#include "tests/bench/moe_gpu/sections.h"

namespace sal::bench::moe_gpu {

using namespace sal::kernels::cuda;

namespace {

// Every operand of one model's experts at `rows` rows each (E experts' rows contiguous).
struct GemmSet {
  int d, E, rows;
  Buffer<Bf16> w1, w2, x, wide, narrow;
  Buffer<float> gw1, gw2, dx;

  GemmSet(const Context& ctx, int d_, int E_, int rows_) : d(d_), E(E_), rows(rows_) {
    const size_t D = size_t(d), F = 4 * D, e = size_t(E), R = size_t(rows) * e;
    w1 = alloc<Bf16>(e * D * F, "w1"), w2 = alloc<Bf16>(e * F * D, "w2"), x = alloc<Bf16>(R * D, "x");
    wide = alloc<Bf16>(R * F, "wide"), narrow = alloc<Bf16>(R * D, "narrow");
    gw1 = alloc<float>(e * D * F, "gw1"), gw2 = alloc<float>(e * F * D, "gw2"), dx = alloc<float>(R * D, "dx");
    fill_random(ctx, w1, 31, 0.02f), fill_random(ctx, w2, 32, 0.02f), fill_random(ctx, x, 33, 1.0f);
    fill_random(ctx, narrow, 34, 1.0f), zero(ctx, gw1), zero(ctx, gw2);
  }

  // The six products of every expert, in the order the modes issue them.
  void pass(const Context& ctx) {
    const int F = 4 * d;
    for (int g = 0; g < E; ++g) {
      const size_t r = size_t(g) * rows;
      const Bf16 *W1 = w1.get() + size_t(g) * d * F, *W2 = w2.get() + size_t(g) * F * d;
      Bf16 *X = x.get() + r * d, *A = wide.get() + r * F, *N = narrow.get() + r * d;
      must(gemm_bf16(ctx, false, false, rows, F, d, 1.0f, X, d, W1, F, 0.0f, A, F), "x W1");
      must(gemm_bf16(ctx, false, false, rows, d, F, 1.0f, A, F, W2, d, 0.0f, N, d), "a W2");
      must(gemm_ld(ctx, true, false, F, d, rows, 1.0f, A, F, N, d, 1.0f, gw2.get() + size_t(g) * F * d, d), "dW2");
      must(gemm_bf16(ctx, false, true, rows, F, d, 1.0f, N, d, W2, d, 0.0f, A, F), "dout W2^T");
      must(gemm_ld(ctx, true, false, d, F, rows, 1.0f, X, d, A, F, 1.0f, gw1.get() + size_t(g) * d * F, F), "dW1");
      must(gemm_ld(ctx, false, true, rows, d, F, 1.0f, A, F, W1, F, 0.0f, dx.get() + r * d, d), "dh W1^T");
    }
  }
};

}  // namespace

void run_expert_gemms(const Context& ctx, const Args& args, const Ceilings& ref, JsonFile& json) {
  std::printf("== (d) expert GEMMs alone (no epilogues), the six products of forward + backward per expert ==\n");
  std::printf("%-6s %3s %6s | %9s %8s %6s\n", "model", "E", "rows", "ms", "TFLOP/s", "%peak");
  for (const Model& m : kModels) {
    for (int rows : {512, 2048, 8192}) {
      char config[64];
      std::snprintf(config, sizeof config, "%s rows=%d", m.name, rows);
      attempt(config, [&] {
        GemmSet set(ctx, m.d, m.experts, rows);
        const double ms = time_loop_ms(ctx, args.warmup, args.iters, [&](int) { set.pass(ctx); });
        check_finite(ctx, set.dx, std::string(config) + " dx");
        check_finite(ctx, set.gw1, std::string(config) + " dW1");
        const double flops = 6.0 * 2.0 * rows * double(m.d) * 4.0 * m.d * m.experts;
        const double tflops = flops / (ms * 1e-3) / 1e12;
        const double pct = ref.peak_tflops > 0 ? 100.0 * tflops / ref.peak_tflops : NAN;
        std::printf("%-6s %3d %6d | %9.3f %8.1f %5.1f%%\n", m.name, m.experts, rows, ms, tflops, pct);
        std::fflush(stdout);
        json.write(model_line("expert_gemms", m)
                       .integer("rows_per_expert", rows)
                       .num("ms", ms)
                       .num("tflops", tflops)
                       .num("pct_peak", pct)
                       .num("peak_tflops", ref.peak_tflops));
      });
    }
  }
  std::printf("\n");
}

}  // namespace sal::bench::moe_gpu
