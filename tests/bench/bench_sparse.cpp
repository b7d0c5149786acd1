// bench_sparse.cpp — what MoEtion's sparse snapshots cost a training worker, against none and
// against a dense snapshot every iteration (Gemini-style), side by side in one run. One process
// trains moe-gpt (all experts local, the quickstart and the larger model); after each update the
// worker's real snapshot machinery (runtime::SparseSnapshots) copies the iteration's slot on its
// own thread while the next step runs and puts it to two real slice endpoints (mesh::SliceServer
// on a libuv loop, each in a process of its own as a peer agent is: this program run with
// --peer), which check the checksums and keep the windows. The next update waits for the copy if
// it is still reading.
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
#include <sys/prctl.h>
#include <unistd.h>
#include <uv.h>
#include <zmq.hpp>

#include <csignal>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "ckpt/slice_mac.h"
#include "mesh/slice_server.h"
#include "model/data.h"
#include "model/local_exchange.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"
#include "model/params.h"
#include "model_configs.h"
#include "one_process_step.h"
#include "runtime/sparse_snapshots.h"

using namespace sal;
using namespace sal::model;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 2;
// The slices' keyed MAC (ckpt/slice_mac.h) with a key the writer and its peer processes share.
const std::string kBenchSliceKey(64, '7');

// `bench_sparse --peer`: a slice endpoint on a libuv loop, as a peer agent holds one, in a process
// of its own; prints its endpoint and serves until its parent exits.
int serve_peer() {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto s = mesh::SliceServer::open(&loop, "127.0.0.1", "");
  if (!s) {
    std::fprintf(stderr, "bench_sparse --peer: %s\n", s.error().message().c_str());
    return 1;
  }
  (*s)->set_budget(uint64_t(8) << 30);
  (*s)->set_mac_key(*ckpt::parse_slice_mac_key(kBenchSliceKey));
  std::printf("%s\n", (*s)->endpoint().c_str());
  std::fflush(stdout);
  uv_run(&loop, UV_RUN_DEFAULT);
  return 0;
}

// A peer process (above), started from this program's own binary.
class Peer {
 public:
  Peer() {
    pipe_ = popen(("exec " + self() + " --peer").c_str(), "r");  // exec: the peer is our child
    char line[512] = {0};
    if (!pipe_ || !std::fgets(line, sizeof line, pipe_)) {
      std::fprintf(stderr, "bench_sparse: a peer process did not start\n");
      std::exit(1);
    }
    endpoint_ = std::string(line, std::strcspn(line, "\n"));
  }
  wire::SliceNode node(uint32_t id) const { return {id, endpoint_, ""}; }

 private:
  static std::string self() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, size_t(n)) : "bench_sparse";
  }
  FILE* pipe_ = nullptr;  // the peer dies with this process (PR_SET_PDEATHSIG)
  std::string endpoint_;
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
  runtime::SparseSnapshots snaps(ctx);
  if (window > 0) snaps.start(schedule_of(d, window), runtime::SliceRoute{0, 0, 1, peers, 0, "", kBenchSliceKey});
  std::vector<const Unit*> units;
  for (const Unit* u : p.units()) units.push_back(u);
  Timing t;
  for (int s = 0; s < kWarmup + steps; ++s) {
    auto t0 = Clock::now();
    double norm = bench::forward_backward(p, c, batch, s);
    snaps.wait();  // the last slot's copy may still be reading
    bench::update(p, norm, s);
    if (window > 0) snaps.after_commit(uint64_t(s), norm, d, units);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--peer") return serve_peer();
  int threads = bench::int_arg(argc, argv, "--threads", 1), steps = bench::int_arg(argc, argv, "--steps", 10),
      repeat = bench::int_arg(argc, argv, "--repeat", 2), window = bench::int_arg(argc, argv, "--window", 8);
  kernels::cpu::set_threads(threads);
  zmq::context_t ctx;
  Peer a, b;
  std::vector<wire::SliceNode> peers{a.node(1), b.node(2)};
  Corpus corpus = bench::random_corpus();
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
