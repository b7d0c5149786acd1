// bench_sparse.cpp — what MoEtion's sparse snapshots cost a training worker, against none and
// against a dense snapshot every iteration (Gemini-style), side by side in one run. One process
// trains moe-gpt (all experts local, the quickstart and the larger model); after each update the
// worker's real snapshot machinery (runtime::SparseSnapshots) copies the iteration's slot on its
// own thread while the next step runs and puts it to two real slice endpoints (mesh::SliceServer,
// each on a libuv loop of its own thread, as two peer agents would hold it), which check the
// checksums and keep the windows. The next update waits for the copy if it is still reading.
//
// Modes: "none" (no schedule), "sparse" (a window of --window iterations, the operators dealt to
// its slots in turn: each iteration copies 1/W of the model in full and the compute weights of the
// operators later slots take), "dense" (a window of 1: every operator in full, every iteration);
// each with the copy only (the worker's own cost) and with the puts to two peer endpoints — which
// on a real mesh hold the slots on other nodes, and here take the same machine's cores.
//
// How to read it: ms/step is the best of --repeat runs of --steps timed steps (after 2 untimed), the
// modes alternating; overhead is ms/step over "none"'s; bytes/iter the slot's bytes (weights and
// moments copied); put MB/s what reaches the peers (bytes/iter x 2 peers / step time). On this
// 2-core machine the compute runs on --threads BLAS threads and the snapshot thread and the two
// endpoints share what is left: with --threads 1, one core computes and the other copies.
//
// For a comparison a noisy machine cannot skew, run one model and one mode a process
// (--model quickstart|larger, --mode none|sparse-copy|sparse|dense-copy|dense) and time the
// processes against each other pair by pair (wall and CPU seconds of the whole process, e.g. with
// /usr/bin/time -v, alternating): docs/performance.md quotes such pairs.
//
//   bench_sparse [--threads N] [--steps S] [--repeat R] [--window W] [--model M --mode X]
//   defaults: 1 thread, 10 steps, 2 repeats, W = 8, every model and mode
#include <uv.h>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/ops.h"
#include "mesh/slice_server.h"
#include "model/data.h"
#include "model/local_exchange.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"
#include "model/params.h"
#include "model_configs.h"
#include "runtime/sparse_snapshots.h"

using namespace sal;
using namespace sal::model;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 2;

// A slice endpoint on a libuv loop of its own thread: a peer agent's, in-process.
class Peer {
 public:
  explicit Peer(zmq::context_t& ctx) {
    uv_loop_init(&loop_);
    uv_async_init(&loop_, &stop_, [](uv_async_t* a) { uv_stop(a->loop); });
    auto s = mesh::SliceServer::open(&loop_, ctx, "127.0.0.1", "");
    if (!s) {
      std::fprintf(stderr, "bench_sparse: %s\n", s.error().message().c_str());
      std::exit(1);
    }
    server_ = std::move(*s);
    server_->set_budget(uint64_t(8) << 30);
    thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
  }
  ~Peer() {
    uv_async_send(&stop_);
    thread_.join();
    server_.reset();
    uv_close(reinterpret_cast<uv_handle_t*>(&stop_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }
  wire::SliceNode node(uint32_t id) const { return {id, server_->endpoint(), ""}; }

 private:
  uv_loop_t loop_{};
  uv_async_t stop_{};
  std::unique_ptr<mesh::SliceServer> server_;
  std::thread thread_;
};

plan::CheckpointSchedule schedule_of(const Dims& d, uint32_t window) {
  plan::CheckpointSchedule s{window, window, std::vector<std::vector<uint32_t>>(window)};
  for (uint32_t op = 0; op < uint32_t(model_unit_count(d)); ++op) s.slots[op % window].push_back(op);
  return s;
}

struct Timing {
  double ms = 0;
  double slot_bytes = 0;
};

// ms per step over `steps` timed steps, snapshots taken as `schedule` says (none: window 0).
Timing time_steps(zmq::context_t& ctx, const std::vector<wire::SliceNode>& peers, Params& p, const Corpus& c, int batch,
                  int steps, uint32_t window) {
  const Dims& d = p.dims;
  OptimConfig oc;
  runtime::SparseSnapshots snaps(ctx);
  if (window > 0) snaps.start(schedule_of(d, window), runtime::SliceRoute{0, 0, 1, peers, ""});
  std::vector<const Unit*> units;
  for (const Unit* u : p.units()) units.push_back(u);
  Timing t;
  for (int s = 0; s < kWarmup + steps; ++s) {
    Batch b = make_batch(c, 1, uint64_t(s), 0, batch, d.seq_len);
    auto t0 = Clock::now();
    LocalExchange ex(p);
    MoeGpt m(p);
    p.zero_grads();
    auto st = m.step(b, int64_t(batch) * d.seq_len, ex);
    if (!st) {
      std::fprintf(stderr, "bench_sparse: %s\n", st.error().message().c_str());
      std::exit(1);
    }
    double norm2 = 0;
    for (Unit* u : p.units()) norm2 += grad_sum_squares(*u);
    snaps.wait();  // the last slot's copy may still be reading
    apply_adamw(p, oc, learning_rate(oc, s), clip_scale(oc, std::sqrt(norm2)), s + 1);
    if (window > 0) snaps.after_commit(uint64_t(s), std::sqrt(norm2), d, units);
    if (s >= kWarmup) {
      t.ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      t.slot_bytes += double(snaps.held().slot_bytes);
    }
  }
  snaps.wait();
  t.ms /= steps;
  t.slot_bytes /= steps;
  return t;
}

std::string text_arg(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return argv[i + 1];
  return "";
}

int arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return std::max(1, std::atoi(argv[i + 1]));
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = arg(argc, argv, "--threads", 1), steps = arg(argc, argv, "--steps", 10),
      repeat = arg(argc, argv, "--repeat", 2), window = arg(argc, argv, "--window", 8);
  kernels::cpu::set_threads(threads);
  zmq::context_t ctx;
  Peer a(ctx), b(ctx);
  std::vector<wire::SliceNode> peers{a.node(1), b.node(2)};
  std::mt19937 rng(1);
  std::vector<uint16_t> tokens(200000);
  for (auto& t : tokens) t = uint16_t(rng() % 256);
  Corpus corpus = Corpus::from_tokens(std::move(tokens), "random bytes");
  struct Mode {
    std::string name;
    uint32_t window;
    bool put;
  };
  const std::string w = " (W = " + std::to_string(window) + ")";
  const std::vector<Mode> modes = {{"none", 0, false},
                                   {"sparse" + w + ", copy only", uint32_t(window), false},
                                   {"sparse" + w + " + 2 peers", uint32_t(window), true},
                                   {"dense, copy only", 1, false},
                                   {"dense + 2 peers", 1, true}};
  const std::vector<wire::SliceNode> nobody;
  const std::string only_model = text_arg(argc, argv, "--model"), only_mode = text_arg(argc, argv, "--mode");
  const std::vector<std::string> mode_keys = {"none", "sparse-copy", "sparse", "dense-copy", "dense"};
  std::printf("snapshots every iteration, one process, %d BLAS threads, 2 peer endpoints, best of %d x %d steps\n\n",
              threads, repeat, steps);
  std::printf("| model | mode | ms/step | tokens/s | overhead | bytes/iter | put MB/s |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& cfg : bench::model_configs()) {
    if (!only_model.empty() && only_model != cfg.name) continue;
    std::vector<Timing> best(modes.size(), Timing{1e300, 0});
    for (int r = 0; r < repeat; ++r)
      for (size_t m = 0; m < modes.size(); ++m) {
        if (!only_mode.empty() && only_mode != mode_keys[m]) continue;
        Params p = Params::create(cfg.dims, 1, Params::all_experts(cfg.dims));
        Timing t = time_steps(ctx, modes[m].put ? peers : nobody, p, corpus, cfg.batch, steps, modes[m].window);
        if (t.ms < best[m].ms) best[m] = t;
      }
    double tokens = double(cfg.batch) * cfg.dims.seq_len;
    for (size_t m = 0; m < modes.size(); ++m) {
      if (!only_mode.empty() && only_mode != mode_keys[m]) continue;
      const Timing& t = best[m];
      double put = modes[m].put ? 2 * t.slot_bytes / 1e6 / (t.ms / 1e3) : 0;
      std::printf("| %s | %s | %.2f | %.0f | %+.1f %% | %.2f MB | %.0f |\n", cfg.name, modes[m].name.c_str(), t.ms,
                  tokens / (t.ms / 1e3), best[0].ms < 1e300 ? 100.0 * (t.ms / best[0].ms - 1.0) : 0.0, t.slot_bytes / 1e6, put);
    }
  }
  return 0;
}
