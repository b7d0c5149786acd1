// main.cpp (bench_moe_gpu) — the MoE layer's GPU kernels (kernels/cuda) timed on one GPU, beside the
// PyTorch peer tests/bench/torch_moe_layer.py, which runs the same layer with the same forced
// routing and counts the same FLOPs. Three sections, each measured in this run:
//
//  (a) reference ceilings: the bf16 matmul peak (gemm_bf16 and gemm at 8192^3, best call of
//      several, TFLOP/s) and the HBM copy bandwidth (cudaMemcpyAsync device-to-device of 1 GiB,
//      GB/s counting the bytes read plus the bytes written);
//  (b) the MoE layer forward + backward at GPT-S/M/L (d, E = 768/8, 1024/12, 1024/16), top-1 and
//      top-2, skew 1 and 4: gate GEMM, softmax, forced routing with the gate probability of the
//      forced expert as combine weight, count_assignments, flexible_dispatch (one worker),
//      permute_rows, permute, expert_mlp_forward, unpermute_combine; then the backward of each.
//      Once per GroupedGemmMode (impl "salamander-grouped" / "salamander-per-expert" /
//      "salamander-fused"), and the expert MLPs alone on the permuted rows as a fraction of the
//      peak of (a);
//  (c) the dispatch schedule + permute as effective GB/s against the copy bandwidth of (a), at one
//      worker and in a pretend 8-worker plan (this process is rank 0), fp32 and bf16 rows;
//  (d) the expert GEMMs alone (no epilogues) at 512, 2 048 and 8 192 rows per expert, as a
//      fraction of the peak of (a): the two regimes public grouped GEMMs are quoted at.
//
// Every section checks what it produced once (no NaN or inf, routing counts as forced, row maps
// that are permutations, the two GEMM modes agreeing): a broken kernel must not give a fast number.
// A failed Status or check prints a "FAILED <configuration>: <text>" line, the other
// configurations still run, and the program exits 1. Without a GPU it prints a "no GPU" line and
// exits 0.
//
// Usage: bench_moe_gpu [--tokens N] [--warmup N] [--iters N] [--dispatch-iters N] [--peak-reps N]
//                      [--json FILE]
// --json writes one JSON object per line: the layer rows with torch_moe_layer.py's keys (model, d,
// experts, k, skew, impl, ms, tokens_per_s, tflops) plus "section": "moe_layer" and extras; the
// other sections' rows carry "section": "gpu" | "peak" | "copy" | "dispatch".
//
// Files: bench_util.h/.cu (failures, options, JSON, buffers, checks, timing, forced routing),
// sections.h, ceilings.cpp (a), moe_layer.cu (b), dispatch.cu (c), expert_gemms.cpp (d), and this main.
#include <cstdio>
#include <memory>
#include <string>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device.h"
#include "tests/bench/moe_gpu/bench_util.h"
#include "tests/bench/moe_gpu/sections.h"

using namespace sal::bench::moe_gpu;
using namespace sal::kernels::cuda;

int main(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) {
    if (i) command += ' ';
    command += argv[i];
  }
  std::printf("command: %s\n", command.c_str());
  const Args args = parse_args(argc, argv);
  if (device_count() == 0) {
    std::printf("no GPU: bench_moe_gpu needs a CUDA device; nothing was measured\n");
    return 0;
  }
  // Each section (and each configuration within one) runs even when an earlier one failed: the
  // failures are printed where they happen and counted; any failure makes the exit status 1.
  std::unique_ptr<Context> ctx;
  std::unique_ptr<JsonFile> json;
  const bool ready = attempt("set-up", [&] {
    must(Context::create(0, &ctx), "Context::create");
    json = std::make_unique<JsonFile>(args.json);
  });
  if (!ready) return 1;
  const std::string gpu = describe(0), versions = library_versions();
  std::printf("GPU 0: %s\nlibraries: %s\n\n", gpu.c_str(), versions.c_str());
  json->write(JsonLine().str("section", "gpu").str("gpu", gpu).str("libraries", versions).str("command", command));
  Ceilings ref;
  attempt("(a) reference ceilings", [&] { ref = measure_ceilings(*ctx, args, *json); });
  attempt("(c) dispatch", [&] { run_dispatch(*ctx, args, ref, *json); });
  attempt("(b) MoE layer", [&] { run_layer(*ctx, args, ref, *json); });
  attempt("(d) expert GEMMs", [&] { run_expert_gemms(*ctx, args, ref, *json); });
  attempt("final synchronize", [&] { must(ctx->synchronize(), "final synchronize"); });
  if (g_failures > 0) {
    std::printf("bench_moe_gpu: %d FAILED (see the FAILED lines above)\n", g_failures);
    return 1;
  }
  std::printf("bench_moe_gpu: all sections ran and passed their checks\n");
  return 0;
}
