// ceilings.cpp — section (a) of bench_moe_gpu: the reference ceilings the other sections are
// measured against, taken in this run: the bf16 matmul peak (gemm_bf16 and gemm at 8192^3, best
// call of several, TFLOP/s) and the HBM copy bandwidth (cudaMemcpyAsync device-to-device of 1 GiB,
// GB/s counting the bytes read plus the bytes written).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/cuda/gemm.h"
#include "tests/bench/moe_gpu/bench_util.h"
#include "tests/bench/moe_gpu/sections.h"

namespace sal::bench::moe_gpu {

using namespace sal::kernels::cuda;

Ceilings measure_ceilings(const Context& ctx, const Args& args, JsonFile& json) {
  Ceilings c;
  std::printf("== (a) reference ceilings, measured now ==\n");
  {
    const int n = 8192;
    const size_t nn = size_t(n) * n;
    auto A = alloc<Bf16>(nn, "peak A"), B = alloc<Bf16>(nn, "peak B"), Cb = alloc<Bf16>(nn, "peak C bf16");
    auto Cf = alloc<float>(nn, "peak C fp32");
    fill_random(ctx, A, 1, 1.0f);
    fill_random(ctx, B, 2, 1.0f);
    const double flops = 2.0 * double(n) * n * n;
    struct Variant {
      const char* name;
      bool bf16_c;
    } variants[] = {{"gemm_bf16 (bf16 C)", true}, {"gemm (fp32 C)", false}};
    for (const Variant& v : variants) {
      auto call = [&] {
        if (v.bf16_c)
          must(gemm_bf16(ctx, false, false, n, n, n, 1.0f, A.get(), n, B.get(), n, 0.0f, Cb.get(), n), v.name);
        else
          must(gemm(ctx, false, false, n, n, n, 1.0f, A.get(), B.get(), 0.0f, Cf.get()), v.name);
      };
      const auto ms = time_each_ms(ctx, 3, args.peak_reps, call);
      if (v.bf16_c)
        check_finite(ctx, Cb, v.name);
      else
        check_finite(ctx, Cf, v.name);
      const double best = flops / (ms.front() * 1e-3) / 1e12, med = flops / (median(ms) * 1e-3) / 1e12;
      c.peak_tflops = std::max(c.peak_tflops, best);
      std::printf("bf16 matmul %d^3, %-20s best %7.1f TFLOP/s, median %7.1f (%d calls)\n", n, v.name, best, med,
                  args.peak_reps);
      json.write(JsonLine()
                     .str("section", "peak")
                     .str("impl", v.name)
                     .integer("n", n)
                     .num("tflops_best", best)
                     .num("tflops_median", med)
                     .num("ms_best", ms.front()));
    }
  }
  {
    const size_t bytes = size_t(1) << 30;
    auto src = alloc<float>(bytes / sizeof(float), "copy src"), dst = alloc<float>(bytes / sizeof(float), "copy dst");
    fill_random(ctx, src, 3, 1.0f);
    auto call = [&] {
      must_cuda(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()),
                "cudaMemcpyAsync (device to device)");
    };
    const auto ms = time_each_ms(ctx, 2, args.peak_reps, call);
    check_finite(ctx, dst, "copy destination");
    const double best = 2.0 * double(bytes) / (ms.front() * 1e-3) / 1e9,
                 med = 2.0 * double(bytes) / (median(ms) * 1e-3) / 1e9;
    c.copy_gbps = best;
    std::printf(
        "HBM copy (cudaMemcpyAsync device to device, 1 GiB; read + write counted): best %7.0f GB/s, median "
        "%7.0f\n\n",
        best, med);
    json.write(JsonLine()
                   .str("section", "copy")
                   .integer("bytes", (long long)bytes)
                   .num("gbps_best", best)
                   .num("gbps_median", med)
                   .num("ms_best", ms.front()));
  }
  return c;
}

}  // namespace sal::bench::moe_gpu
