// moe_layer.cu — section (b) of bench_moe_gpu: the MoE layer forward + backward at GPT-S/M/L
// (d, E = 768/8, 1024/12, 1024/16), top-1 and top-2, skew 1 and 4, as tests/bench/torch_moe_layer.py
// runs it: gate GEMM, softmax, forced routing with the gate probability of the forced expert as
// combine weight, count_assignments, flexible_dispatch (one worker), permute_rows, permute,
// expert_mlp_forward, unpermute_combine; then the backward of each. Once per GroupedGemmMode, each
// configuration checked once (and the two modes against each other) before it is timed, and the
// expert MLPs alone as a fraction of the peak of (a).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/convert.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/cuda/permute.h"
#include "kernels/cuda/softmax.h"
#include "tests/bench/moe_gpu/bench_util.h"
#include "tests/bench/moe_gpu/sections.h"

namespace sal::bench::moe_gpu {

using namespace sal::kernels::cuda;

namespace {

// ---- private kernels: the gate's gather and scatter ----------------------------------------------

// The combine weights: w[a] = probs[t][idx[a]], a = t*k + j (the gate probability of the forced
// expert, not renormalised, as torch's probs.gather). Ids are in range (checked on the host).
__global__ void gather_gate_kernel(const float* __restrict__ probs, const int32_t* __restrict__ idx, int n, int k,
                                   int E, float* __restrict__ w) {
  const int a = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (a >= n) return;
  w[a] = probs[size_t(a / k) * E + idx[a]];
}

// Its backward: d_probs[t][e] = sum over j with idx[t*k + j] == e of d_w[t*k + j], j in order
// (0 for the experts token t did not choose). One thread per (t, e).
__global__ void scatter_gate_grad_kernel(const float* __restrict__ d_w, const int32_t* __restrict__ idx, int tokens,
                                         int k, int E, float* __restrict__ d_probs) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(tokens) * E) return;
  const int t = int(i / E), e = int(i % E);
  float s = 0.0f;
  for (int j = 0; j < k; ++j)
    if (idx[size_t(t) * k + j] == e) s += d_w[size_t(t) * k + j];
  d_probs[i] = s;
}

// ---- the layer ----------------------------------------------------------------------------------------

// One layer's parameters: fp32 masters, their bf16 copies (made once, outside every timed loop)
// and fp32 gradients. Per-expert blocks are contiguous: expert e's w1 at w1 + e*d*4d, etc.
struct LayerParams {
  int d = 0, E = 0;
  Buffer<float> wg, w1, b1, w2, b2;       // masters
  Buffer<Bf16> wg_b, w1_b, w2_b;          // bf16 copies
  Buffer<float> gwg, gw1, gb1, gw2, gb2;  // gradients (accumulated into)
  std::vector<ExpertParams> experts;
  std::vector<ExpertGrads> grads;

  LayerParams(const Context& ctx, int d_, int E_) : d(d_), E(E_) {
    const size_t D = size_t(d), F = 4 * D, e = size_t(E);
    wg = alloc<float>(D * e, "wg"), w1 = alloc<float>(e * D * F, "w1"), b1 = alloc<float>(e * F, "b1");
    w2 = alloc<float>(e * F * D, "w2"), b2 = alloc<float>(e * D, "b2");
    fill_random(ctx, wg, 11, 0.02f), fill_random(ctx, w1, 12, 0.02f), fill_random(ctx, b1, 13, 0.02f);
    fill_random(ctx, w2, 14, 0.02f), fill_random(ctx, b2, 15, 0.02f);
    wg_b = alloc<Bf16>(wg.size(), "wg bf16"), w1_b = alloc<Bf16>(w1.size(), "w1 bf16");
    w2_b = alloc<Bf16>(w2.size(), "w2 bf16");
    must(to_bf16(ctx, wg.get(), wg_b.get(), wg.size()), "to_bf16 wg");
    must(to_bf16(ctx, w1.get(), w1_b.get(), w1.size()), "to_bf16 w1");
    must(to_bf16(ctx, w2.get(), w2_b.get(), w2.size()), "to_bf16 w2");
    gwg = alloc<float>(wg.size(), "gwg"), gw1 = alloc<float>(w1.size(), "gw1"), gb1 = alloc<float>(b1.size(), "gb1");
    gw2 = alloc<float>(w2.size(), "gw2"), gb2 = alloc<float>(b2.size(), "gb2");
    zero_grads(ctx);
    for (size_t g = 0; g < e; ++g) {
      experts.push_back({w1_b.get() + g * D * F, b1.get() + g * F, w2_b.get() + g * F * D, b2.get() + g * D});
      grads.push_back({gw1.get() + g * D * F, gb1.get() + g * F, gw2.get() + g * F * D, gb2.get() + g * D});
    }
  }
  void zero_grads(const Context& ctx) {
    zero(ctx, gwg), zero(ctx, gw1), zero(ctx, gb1), zero(ctx, gw2), zero(ctx, gb2);
  }
  void check_grads(const Context& ctx, const std::string& what) {
    check_finite(ctx, gwg, what + " dWg"), check_finite(ctx, gw1, what + " dW1"), check_finite(ctx, gb1, what + " db1");
    check_finite(ctx, gw2, what + " dW2"), check_finite(ctx, gb2, what + " db2");
  }
};

// One configuration's activations (tokens N, top-k): everything the pass writes, allocated once.
struct LayerRun {
  const Context& ctx;
  LayerParams& p;
  int N, k, E, d;
  size_t n;                       // assignments N*k = rows R of the send buffer at one worker
  std::vector<int64_t> expected;  // forced expert counts
  std::vector<int> host_rows;     // the expert row counts the host passes to the expert MLPs
  Buffer<float> x, logits, probs, w, xs, y, out, gout, d_rows, d_w, d_send, dx, d_probs, d_logits;
  Buffer<Bf16> xb, d_logits_b, saved_x;
  Buffer<float> saved_h;
  Buffer<int32_t> idx, rows;
  Buffer<uint32_t> counts, units, send, quota;
  Buffer<int> bad;
  Buffer<uint8_t> perm_ws, scratch;
  uint32_t* quota_host = nullptr;  // pinned: the per-pass device-to-host copy of the row counts

  LayerRun(const Context& c, LayerParams& params, int tokens, int k_, double skew)
      : ctx(c), p(params), N(tokens), k(k_), E(params.E), d(params.d), n(size_t(tokens) * k_) {
    const size_t D = size_t(d), F = 4 * D, e = size_t(E), NT = size_t(N);
    expected = expert_counts(N, k, E, skew);
    idx = upload(forced_routing(N, k, expected), "idx");
    units = upload(std::vector<uint32_t>(e, 1u), "units");  // one worker, one replica unit of each expert
    x = alloc<float>(NT * D, "x"), gout = alloc<float>(NT * D, "gout");
    fill_random(ctx, x, 21, 1.0f), fill_random(ctx, gout, 22, 1.0f);
    logits = alloc<float>(NT * e, "logits"), probs = alloc<float>(NT * e, "probs"), w = alloc<float>(n, "w");
    xs = alloc<float>(n * D, "xs"), y = alloc<float>(n * D, "y"), out = alloc<float>(NT * D, "out");
    d_rows = alloc<float>(n * D, "d_rows"), d_w = alloc<float>(n, "d_w"), d_send = alloc<float>(n * D, "d_send");
    dx = alloc<float>(NT * D, "dx"), d_probs = alloc<float>(NT * e, "d_probs"),
    d_logits = alloc<float>(NT * e, "d_logits");
    xb = alloc<Bf16>(NT * D, "xb"), d_logits_b = alloc<Bf16>(NT * e, "d_logits bf16");
    saved_x = alloc<Bf16>(n * D, "saved.x"), saved_h = alloc<float>(n * F, "saved.h");
    rows = alloc<int32_t>(n, "rows");
    counts = alloc<uint32_t>(e, "counts"), send = alloc<uint32_t>(e, "send"), quota = alloc<uint32_t>(e, "quota");
    bad = alloc<int>(1, "bad_expert");
    perm_ws = alloc<uint8_t>(permute_workspace_bytes(N, k, E, 1), "permute workspace");
    scratch = alloc<uint8_t>(expert_mlp_scratch_bytes(int(n), d), "expert scratch");
    must_cuda(cudaMallocHost(reinterpret_cast<void**>(&quota_host), e * sizeof(uint32_t)), "cudaMallocHost");
    host_rows.assign(e, 0);
  }
  ~LayerRun() {
    if (quota_host) cudaFreeHost(quota_host);
  }
  LayerRun(const LayerRun&) = delete;
  LayerRun& operator=(const LayerRun&) = delete;

  ExpertSaved saved() const { return {saved_x.get(), saved_h.get()}; }

  // Gate, routing, dispatch schedule, permute, and the host's copy of the expert row counts.
  void route() {
    const Context& c = ctx;
    must(to_bf16(c, x.get(), xb.get(), x.size()), "to_bf16 x");
    must(gemm(c, false, false, N, E, d, 1.0f, xb.get(), p.wg_b.get(), 0.0f, logits.get()), "gate gemm");
    must(softmax_forward(c, logits.get(), probs.get(), N, E), "softmax_forward");
    gather_gate_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, c.stream()>>>(probs.get(), idx.get(),
                                                                                             int(n), k, E, w.get());
    must(launch_status("gather_gate_kernel"), "gather gate weights");
    must(count_assignments(c, idx.get(), N, k, E, counts.get()), "count_assignments");
    must(flexible_dispatch(c, counts.get(), units.get(), E, 1, send.get(), quota.get(), bad.get()),
         "flexible_dispatch");
    must(permute_rows(c, idx.get(), N, k, send.get(), E, 1, 0, rows.get(), perm_ws.get(), perm_ws.size()),
         "permute_rows");
    must(permute(c, x.get(), rows.get(), N, k, d, xs.get()), "permute");
    // The host sizes the expert GEMMs: at one worker, expert e's rows are its quota.
    must_cuda(
        cudaMemcpyAsync(quota_host, quota.get(), size_t(E) * sizeof(uint32_t), cudaMemcpyDeviceToHost, c.stream()),
        "cudaMemcpyAsync (row counts to host)");
    must(c.synchronize(), "synchronize (row counts)");
    for (int g = 0; g < E; ++g) {
      check(int64_t(quota_host[g]) == expected[size_t(g)], "expert " + std::to_string(g) + " has " +
                                                               std::to_string(quota_host[g]) + " rows, forced " +
                                                               std::to_string(expected[size_t(g)]));
      host_rows[size_t(g)] = int(quota_host[g]);
    }
  }

  void experts_forward(GroupedGemmMode mode) {
    must(expert_mlp_forward(ctx, mode, E, host_rows.data(), d, p.experts.data(), xs.get(), y.get(), saved(),
                            scratch.get(), scratch.size()),
         "expert_mlp_forward");
  }

  void experts_backward(GroupedGemmMode mode) {
    must(expert_mlp_backward(ctx, mode, E, host_rows.data(), d, p.experts.data(), saved(), d_rows.get(), d_send.get(),
                             p.grads.data(), scratch.get(), scratch.size()),
         "expert_mlp_backward");
  }

  // One forward + backward pass of the layer (d_out = gout).
  void pass(GroupedGemmMode mode) {
    const Context& c = ctx;
    route();
    experts_forward(mode);
    must(unpermute_combine(c, y.get(), rows.get(), w.get(), N, k, d, out.get()), "unpermute_combine");
    // backward
    must(unpermute_combine_backward(c, gout.get(), y.get(), rows.get(), w.get(), N, k, d, d_rows.get(), d_w.get()),
         "unpermute_combine_backward");
    experts_backward(mode);
    must(permute_backward(c, d_send.get(), rows.get(), N, k, d, dx.get()), "permute_backward");
    const size_t NE = size_t(N) * E;
    scatter_gate_grad_kernel<<<unsigned((NE + kThreads - 1) / kThreads), kThreads, 0, c.stream()>>>(
        d_w.get(), idx.get(), N, k, E, d_probs.get());
    must(launch_status("scatter_gate_grad_kernel"), "scatter gate gradient");
    must(softmax_backward(c, probs.get(), d_probs.get(), d_logits.get(), N, E), "softmax_backward");
    must(to_bf16(c, d_logits.get(), d_logits_b.get(), NE), "to_bf16 d_logits");
    // dWg += x^T d_logits; dx += d_logits Wg^T (onto the experts' part from permute_backward).
    must(gemm(c, true, false, d, E, N, 1.0f, xb.get(), d_logits_b.get(), 1.0f, p.gwg.get()), "gate dWg gemm");
    must(gemm(c, false, true, N, d, E, 1.0f, d_logits_b.get(), p.wg_b.get(), 1.0f, dx.get()), "gate dx gemm");
  }

  // Poisons every activation the pass writes, runs one pass and checks it: the schedule flagged no
  // expert, the row map is a permutation, and nothing written is NaN or inf.
  void validate(GroupedGemmMode mode, const std::string& what) {
    for (Buffer<float>* b : {&logits, &probs, &w, &xs, &y, &out, &d_rows, &d_w, &d_send, &dx, &d_probs, &d_logits})
      poison(ctx, *b);
    poison(ctx, xb), poison(ctx, d_logits_b), poison(ctx, saved_x), poison(ctx, saved_h), poison(ctx, rows);
    pass(mode);
    check(download(ctx, bad)[0] == -1, what + ": flexible_dispatch flagged an expert without replicas");
    check_permutation(download(ctx, rows), what + " row map");
    const std::pair<const Buffer<float>*, const char*> written[] = {
        {&probs, "probs"},      {&w, "combine weights"}, {&xs, "permuted rows"},
        {&y, "expert outputs"}, {&out, "layer output"},  {&d_rows, "d_rows"},
        {&d_w, "d_w"},          {&d_send, "d_send"},     {&dx, "dx"},
        {&d_logits, "d_logits"}};
    for (const auto& [b, name] : written) check_finite(ctx, *b, what + " " + name);
    if (mode == GroupedGemmMode::fused)  // bf16 pre-activations in saved.h's first half
      check_finite(ctx, reinterpret_cast<const Bf16*>(saved_h.get()), saved_h.size(), what + " saved.h (bf16)");
    else
      check_finite(ctx, saved_h, what + " saved.h");
    p.check_grads(ctx, what);
  }
};

struct LayerResult {
  double ms = 0, expert_ms = 0;
};

}  // namespace

void run_layer(const Context& ctx, const Args& args, const Ceilings& ref, JsonFile& json) {
  const char* impl_names[] = {"salamander-grouped", "salamander-per-expert", "salamander-fused"};
  const GroupedGemmMode modes[] = {GroupedGemmMode::grouped, GroupedGemmMode::per_group, GroupedGemmMode::fused};
  {
    std::printf("== (b) MoE layer forward + backward, %d tokens per pass, %d warmup + %d timed passes ==\n",
                args.tokens, args.warmup, args.iters);
    std::printf(
        "Layer as tests/bench/torch_moe_layer.py: gate x Wg, softmax, forced routing (skew s: the first\n"
        "max(1, E/4) experts get s times the others' assignments), combine weight = gate probability of\n"
        "the forced expert; d -> 4d -> d tanh-GELU experts with biases. Weights: fp32 masters, bf16 copies\n"
        "made once outside the timed loop (torch holds bf16 parameters); activations fp32, GEMM operands\n"
        "bf16, fp32 accumulation. Rows are permuted in fp32 (expert_mlp_forward takes fp32 rows and\n"
        "rounds them to bf16 itself). Each pass copies the E expert row counts to the host and waits\n"
        "for them (the host sizes the expert GEMMs). FLOPs counted: expert GEMMs only,\n"
        "3 * 2 * tokens * k * 8 d^2. 'experts' = expert_mlp_forward + backward alone on the permuted rows\n"
        "(GEMMs and their bias/GELU epilogues), as %% of the bf16 matmul peak of (a).\n");
    std::printf("%-6s %2s %4s %-22s %9s %12s %8s | %10s %8s %6s\n", "model", "k", "skew", "impl", "ms", "tokens/s",
                "TFLOP/s", "experts ms", "TFLOP/s", "%peak");
  }
  for (const Model& m : kModels) {
    attempt(std::string(m.name) + " parameters", [&] {
      LayerParams params(ctx, m.d, m.experts);
      for (int k : {1, 2}) {
        for (double skew : {1.0, 4.0}) {
          char config[64];
          std::snprintf(config, sizeof config, "%s k=%d skew=%g", m.name, k, skew);
          attempt(config, [&] {
            LayerRun run(ctx, params, args.tokens, k, skew);
            const double flops = 3.0 * 2.0 * double(args.tokens) * k * 8.0 * double(m.d) * m.d;
            std::vector<float> ref_out, ref_dx;  // the grouped mode's, for the other modes to match
            for (int mi = 0; mi < 3; ++mi) {
              const GroupedGemmMode mode = modes[mi];
              const std::string what = std::string(config) + " " + impl_names[mi];
              attempt(what, [&] {
                params.zero_grads(ctx);
                run.validate(mode, what);
                LayerResult r;
                r.ms = time_loop_ms(ctx, args.warmup, args.iters, [&](int) { run.pass(mode); });
                // The timed passes too must have produced numbers; and both modes the same ones.
                check_finite(ctx, run.out, what + " layer output after timing");
                check_finite(ctx, run.dx, what + " dx after timing");
                auto out = download(ctx, run.out), dx = download(ctx, run.dx);
                if (mi == 0) {
                  ref_out = std::move(out), ref_dx = std::move(dx);
                } else if (!ref_out.empty()) {
                  const double eo = rel_error(out, ref_out), ed = rel_error(dx, ref_dx);
                  check(eo < 2e-2 && ed < 2e-2, what + ": this mode and the grouped mode disagree (output " +
                                                    std::to_string(eo) + ", dx " + std::to_string(ed) + " relative)");
                }
                // The expert MLPs alone, on the rows this pass permuted.
                r.expert_ms = time_loop_ms(ctx, args.warmup, args.iters, [&](int) {
                  run.experts_forward(mode);
                  run.experts_backward(mode);
                });
                check_finite(ctx, run.d_send, what + " experts-alone dx");
                params.check_grads(ctx, what + " after timing");
                const double s = r.ms * 1e-3, tflops = flops / s / 1e12, etflops = flops / (r.expert_ms * 1e-3) / 1e12;
                const double pct = ref.peak_tflops > 0 ? 100.0 * etflops / ref.peak_tflops : NAN;
                std::printf("%-6s %2d %4.0f %-22s %9.3f %12.0f %8.1f | %10.3f %8.1f %5.1f%%\n", m.name, k, skew,
                            impl_names[mi], r.ms, args.tokens / s, tflops, r.expert_ms, etflops, pct);
                std::fflush(stdout);
                json.write(model_line("moe_layer", m)
                               .integer("k", k)
                               .num("skew", skew)
                               .str("impl", impl_names[mi])
                               .num("ms", r.ms)
                               .num("tokens_per_s", args.tokens / s)
                               .num("tflops", tflops)
                               .integer("tokens", args.tokens)
                               .num("expert_ms", r.expert_ms)
                               .num("expert_tflops", etflops)
                               .num("expert_pct_peak", pct)
                               .num("peak_tflops", ref.peak_tflops));
              });
            }
          });
        }
      }
    });
  }
  std::printf("\n");
}

}  // namespace sal::bench::moe_gpu
