// dispatch.cu — section (c) of bench_moe_gpu: the dispatch schedule (count_assignments,
// flexible_dispatch, dispatch_row_counts, permute_rows) + permute as effective GB/s against the copy
// bandwidth of (a), at one worker and in a pretend 8-worker plan (this process is rank 0), fp32
// and bf16 rows; launched call by call and replayed from a CUDA graph. Each schedule and send
// buffer is checked (no expert flagged, a permutation, finite rows) around every timing.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/dispatch.h"
#include "kernels/cuda/permute.h"
#include "tests/bench/moe_gpu/bench_util.h"
#include "tests/bench/moe_gpu/sections.h"

namespace sal::bench::moe_gpu {

using namespace sal::kernels::cuda;

namespace {

// ---- private kernel: a fake all-gather -------------------------------------------------------------

// Stand-in for the all-gather of the token counts in the pretend W-worker plan: every worker
// routed as this one did, tokens[e][j] = counts[e].
__global__ void broadcast_counts_kernel(const uint32_t* __restrict__ counts, int E, int W,
                                        uint32_t* __restrict__ tokens) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < E * W) tokens[i] = counts[i / W];
}

// ---- the pretend plan and the graph -------------------------------------------------------------------

// Lazarus's load-aware replica allocation (policies/allocation/lazarus.lua, Eq. 1): experts in
// ascending load, each its share of the slots left in proportion to its load among the experts
// still to come, never fewer than f (and leaving f for each of those); the last takes the rest.
std::vector<int> lazarus_replicas(const std::vector<int64_t>& loads, int slots, int f) {
  const int n = int(loads.size());
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return loads[size_t(a)] < loads[size_t(b)]; });
  double rest = 0;
  for (int64_t t : loads) rest += double(t);
  std::vector<int> r(size_t(n), 0);
  int given = 0;
  for (int i = 0; i < n; ++i) {
    const int e = order[size_t(i)], left = slots - given;
    int v;
    if (i == n - 1)
      v = left;
    else if (rest > 0)
      v = std::max(int(std::floor(double(loads[size_t(e)]) / rest * left)), f);
    else
      v = std::max(left / (n - i), f);
    v = std::min(v, left - f * (n - 1 - i));
    r[size_t(e)] = v;
    given += v;
    rest -= double(loads[size_t(e)]);
  }
  return r;
}

// units[e][j] of a pretend W-worker plan: c = max(2, ceil(2E / W)) slots per worker, lazarus
// replicas, the units dealt round-robin over the workers expert by expert (each worker gets c).
std::vector<uint32_t> pretend_plan(const std::vector<int64_t>& counts, int W, int* slots_per_worker) {
  const int E = int(counts.size());
  const int c = std::max(2, (2 * E + W - 1) / W);
  *slots_per_worker = c;
  const std::vector<int> r = lazarus_replicas(counts, W * c, 1);
  std::vector<uint32_t> units(size_t(E) * W, 0);
  int u = 0;
  for (int e = 0; e < E; ++e)
    for (int i = 0; i < r[size_t(e)]; ++i, ++u) units[size_t(e) * W + size_t(u % W)] += 1;
  return units;
}

// A CUDA graph of work enqueued on ctx.stream(): replaying it launches the whole sequence at once,
// so a timing of many small kernels shows the GPU's time rather than the host's launch rate.
class Graph {
 public:
  Graph() = default;
  ~Graph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Records f()'s work (which must only enqueue on ctx.stream()). On any failure the capture is
  // ended, so the stream is usable again, and the Failure is passed on.
  template <class F>
  void capture(const Context& ctx, F&& f) {
    must_cuda(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    std::string inner;
    try {
      f();
    } catch (const Failure& x) {
      inner = x.what;
    }
    const cudaError_t e = cudaStreamEndCapture(ctx.stream(), &graph_);
    if (!inner.empty()) throw Failure{"while capturing a graph: " + inner};
    must_cuda(e, "cudaStreamEndCapture");
    must_cuda(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
  }
  void launch(const Context& ctx) const { must_cuda(cudaGraphLaunch(exec_, ctx.stream()), "cudaGraphLaunch"); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

void run_dispatch(const Context& ctx, const Args& args, const Ceilings& ref, JsonFile& json) {
  const double skew = 4.0;
  const int kRot = 4;  // input and output buffers rotated so that repeated calls do not run from L2
  std::printf("== (c) dispatch schedule + permute, %d tokens, skew %.0f, %d timed calls each ==\n", args.tokens, skew,
              args.dispatch_iters);
  std::printf(
      "Bytes counted: per assignment, one x row read (d fp32) and one send-buffer row written (d fp32 or\n"
      "bf16): tokens*k*d*(4 + 4|2); index traffic (ids, counts, schedule, row map) is not counted.\n"
      "pipeline = count_assignments, [W > 1: counts copied to every worker, standing in for the\n"
      "all-gather], flexible_dispatch, dispatch_row_counts, permute_rows, permute: 'stream' launched call\n"
      "by call as a worker would, 'graph' replayed from a CUDA graph (the GPU's own time). 'permute' =\n"
      "the row copy alone. W = 8: a pretend plan (c slots per worker, lazarus replicas dealt round-robin,\n"
      "every worker routed like this one), this process is rank 0; 'kept' = rows rank 0 keeps. x and the\n"
      "send buffer rotate over %d copies (no L2 reuse between calls). %%copy = of the copy bandwidth of (a).\n",
      kRot);
  std::printf("%-6s %2s %-4s %2s %6s | %9s %9s | %9s %9s %6s | %10s %9s %6s\n", "model", "k", "out", "W", "kept",
              "stream us", "GB/s", "graph us", "GB/s", "%copy", "permute us", "GB/s", "%copy");
  for (const Model& m : {kModels[0], kModels[2]}) {
    const int E = m.experts, d = m.d, N = args.tokens;
    const size_t D = size_t(d);
    std::vector<Buffer<float>> xs;
    for (int i = 0; i < kRot; ++i) {
      xs.push_back(alloc<float>(size_t(N) * D, "dispatch x"));
      fill_random(ctx, xs.back(), 31 + uint64_t(i), 1.0f);
    }
    for (int k : {1, 2}) {
      const size_t n = size_t(N) * k;
      const auto expected = expert_counts(N, k, E, skew);
      auto idx = upload(forced_routing(N, k, expected), "dispatch idx");
      std::vector<Buffer<float>> out_f;
      std::vector<Buffer<Bf16>> out_b;
      for (int i = 0; i < kRot; ++i) {
        out_f.push_back(alloc<float>(n * D, "send buffer fp32"));
        out_b.push_back(alloc<Bf16>(n * D, "send buffer bf16"));
      }
      for (int W : {1, 8}) {
        char what[96];
        std::snprintf(what, sizeof what, "dispatch %s k=%d W=%d", m.name, k, W);
        attempt(what, [&] {
          int slots = 1;
          const std::vector<uint32_t> units_h =
              W == 1 ? std::vector<uint32_t>(size_t(E), 1u) : pretend_plan(expected, W, &slots);
          auto units = upload(units_h, "units");
          auto counts = alloc<uint32_t>(size_t(E), "counts"), tokens = alloc<uint32_t>(size_t(E) * W, "tokens");
          auto send = alloc<uint32_t>(size_t(E) * W * W, "send"), quota = alloc<uint32_t>(size_t(E) * W, "quota");
          auto bad = alloc<int>(1, "bad_expert");
          auto send_rows = alloc<int64_t>(size_t(W), "send_rows"), recv_rows = alloc<int64_t>(size_t(W), "recv_rows");
          auto rows = alloc<int32_t>(n, "rows");
          auto ws = alloc<uint8_t>(permute_workspace_bytes(N, k, E, W), "permute workspace");
          auto schedule = [&] {
            must(count_assignments(ctx, idx.get(), N, k, E, counts.get()), "count_assignments");
            const uint32_t* tok = counts.get();
            if (W > 1) {
              broadcast_counts_kernel<<<unsigned((E * W + kThreads - 1) / kThreads), kThreads, 0, ctx.stream()>>>(
                  counts.get(), E, W, tokens.get());
              must(launch_status("broadcast_counts_kernel"), "broadcast counts");
              tok = tokens.get();
            }
            must(flexible_dispatch(ctx, tok, units.get(), E, W, send.get(), quota.get(), bad.get()),
                 "flexible_dispatch");
            must(dispatch_row_counts(ctx, send.get(), E, W, 0, send_rows.get(), recv_rows.get()),
                 "dispatch_row_counts");
            must(permute_rows(ctx, idx.get(), N, k, send.get(), E, W, 0, rows.get(), ws.get(), ws.size()),
                 "permute_rows");
          };
          // Check the schedule once: no expert flagged, rank 0's rows a permutation of its send buffer.
          poison(ctx, rows);
          schedule();
          check(download(ctx, bad)[0] == -1, std::string(what) + ": flexible_dispatch flagged an expert");
          check_permutation(download(ctx, rows), what);
          const double kept = double(download(ctx, send_rows)[0]) / double(n);
          for (int bf = 0; bf < 2; ++bf) {
            const char* out_name = bf ? "bf16" : "fp32";
            const std::string label = std::string(what) + " " + out_name;
            auto copy = [&](int i) {
              const float* x = xs[size_t(i % kRot)].get();
              if (bf)
                must(permute(ctx, x, rows.get(), N, k, d, out_b[size_t(i % kRot)].get()), "permute bf16");
              else
                must(permute(ctx, x, rows.get(), N, k, d, out_f[size_t(i % kRot)].get()), "permute fp32");
            };
            auto poison_outputs = [&] {
              for (int i = 0; i < kRot; ++i) {
                if (bf)
                  poison(ctx, out_b[size_t(i)]);
                else
                  poison(ctx, out_f[size_t(i)]);
              }
            };
            // After a timed run every send buffer (poisoned first, all of them written by the warmup
            // calls) must hold finite numbers only, and the schedule must still flag nothing.
            auto check_outputs = [&](const char* after) {
              for (int i = 0; i < kRot; ++i) {
                if (bf)
                  check_finite(ctx, out_b[size_t(i)], label + " send buffer after " + after);
                else
                  check_finite(ctx, out_f[size_t(i)], label + " send buffer after " + after);
              }
              check(download(ctx, bad)[0] == -1, label + ": flexible_dispatch flagged an expert after " + after);
            };
            const int warm = kRot + 1;
            poison_outputs();
            const double stream_us = 1e3 * time_loop_ms(ctx, warm, args.dispatch_iters, [&](int i) {
                                       schedule();
                                       copy(i);
                                     });
            check_outputs("the stream pipeline");
            std::vector<Graph> graphs(static_cast<size_t>(kRot));
            for (int i = 0; i < kRot; ++i)
              graphs[size_t(i)].capture(ctx, [&] {
                schedule();
                copy(i);
              });
            poison_outputs();
            const double graph_us = 1e3 * time_loop_ms(ctx, warm, args.dispatch_iters,
                                                       [&](int i) { graphs[size_t(i % kRot)].launch(ctx); });
            check_outputs("the graph pipeline");
            poison_outputs();
            const double perm_us = 1e3 * time_loop_ms(ctx, warm, args.dispatch_iters, copy);
            check_outputs("permute alone");
            const double bytes = double(n) * double(D) * double(4 + (bf ? 2 : 4));
            auto gbps = [&](double us) { return bytes / (us * 1e-6) / 1e9; };
            auto pct = [&](double us) { return 100.0 * gbps(us) / ref.copy_gbps; };
            std::printf("%-6s %2d %-4s %2d %5.1f%% | %9.1f %9.0f | %9.1f %9.0f %5.1f%% | %10.1f %9.0f %5.1f%%\n",
                        m.name, k, out_name, W, 100.0 * kept, stream_us, gbps(stream_us), graph_us, gbps(graph_us),
                        pct(graph_us), perm_us, gbps(perm_us), pct(perm_us));
            std::fflush(stdout);
            json.write(model_line("dispatch", m)
                           .integer("k", k)
                           .num("skew", skew)
                           .str("out", out_name)
                           .integer("workers", W)
                           .integer("slots_per_worker", slots)
                           .num("kept_fraction", kept)
                           .integer("tokens", N)
                           .num("bytes", bytes)
                           .num("pipeline_stream_us", stream_us)
                           .num("pipeline_stream_gbps", gbps(stream_us))
                           .num("pipeline_us", graph_us)
                           .num("pipeline_gbps", gbps(graph_us))
                           .num("permute_us", perm_us)
                           .num("permute_gbps", gbps(perm_us))
                           .num("copy_gbps", ref.copy_gbps));
          }
        });
      }
    }
  }
  std::printf("\n");
}

}  // namespace sal::bench::moe_gpu
