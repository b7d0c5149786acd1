// bench_nccl.cpp — the NCCL data plane's recovery costs and collective latency on the GPUs of this
// machine, one worker process per GPU (forked before anything touches CUDA; gpu_probe.h counts the
// GPUs in a child), rendezvousing through a real StoreServer as the engine's workers do.
//
// Lifecycle, over N repetitions, each figure the slowest rank of its repetition: create (connect:
// id through the store + ncclCommInitRankConfig until ready, and the init alone), destroy
// (finalize + destroy), revoke (ncclCommRevoke until quiescent) and the destroy after it, abort
// (ncclCommAbort), and with 2+ GPUs the ways back after losing the last rank: shrink of a healthy
// communicator (NCCL_SHRINK_DEFAULT), shrink with NCCL_SHRINK_ABORT, revoke + shrink, and a fresh
// connect over the survivors — which one the agent should use. Then all-reduce and all-to-all-v
// latency for a few sizes on one communicator over every GPU (host-measured per call, as the
// worker sees it: enqueue + polling until the stream is idle).
//
// Usage: bench_nccl [--reps N] [--gpus N] [--iters N]. Prints the command, the GPUs and the library
// versions first and the tables last. Exits 0 with a "no GPU" line on a machine without one.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "comm/gpu_probe.h"
#include "comm/nccl_collectives.h"
#include "comm/store_client.h"
#include "comm/store_server.h"
#include "comm/workers.h"
#include "core/clock.h"
#include "kernels/cuda/buffer.h"

using namespace sal;
using namespace sal::comm;
using namespace std::chrono_literals;
using sal::kernels::cuda::Buffer;
using sal::test::Report;
using sal::test::Workers;

namespace {

struct Args {
  int reps = 10;
  int gpus = 0;  // 0: all
  int iters = 100;
};

struct Env {
  zmq::context_t zmq{1};
  StoreClient store;
  explicit Env(const std::string& endpoint) : store(zmq, endpoint) {}
};

NcclOptions options(int rank, int size, const std::string& prefix) {
  NcclOptions o;
  o.rank = rank;
  o.size = size;
  o.device = rank;
  o.prefix = prefix;
  o.rendezvous_timeout_ms = 60000;
  o.init_timeout_ms = 60000;
  o.op_timeout_ms = 30000;
  o.teardown_timeout_ms = 30000;
  return o;
}

double ms_since(int64_t t0) { return double(mono_ns() - t0) / 1e6; }

// Per-worker series of measurements, reported as "name=v1,v2,..." lines.
class Series {
 public:
  void add(const std::string& name, double v) { data_[name].push_back(v); }
  void note_into(Report& rep) const {
    for (const auto& [name, values] : data_) {
      std::string line = name + "=";
      for (size_t i = 0; i < values.size(); ++i) {
        char b[32];
        std::snprintf(b, sizeof b, "%s%.4f", i ? "," : "", values[i]);
        line += b;
      }
      rep.note(line);
    }
  }

 private:
  std::map<std::string, std::vector<double>> data_;
};

std::string msg(const Status& st) { return st.ok() ? std::string("ok") : st.error().message(); }

// Connects, checks, and synchronises the ranks with one barrier.
std::unique_ptr<NcclCollectives> up(Env& env, const NcclOptions& o, Report& rep, double* connect_ms, double* init_ms) {
  int64_t t0 = mono_ns();
  auto c = connect_nccl_object(o, env.store);
  if (!c) {
    rep.check(false, o.prefix + ": " + c.error().message());
    return nullptr;
  }
  if (connect_ms) *connect_ms = ms_since(t0);
  if (init_ms) *init_ms = (*c)->init_ms();
  auto st = (*c)->barrier();
  rep.check(st.ok(), o.prefix + " barrier: " + msg(st));
  return st.ok() ? std::move(*c) : nullptr;
}

// The ways back after losing the last rank. The excluded rank takes no part; it waits until the
// survivors are done (a store key), then aborts its communicator.
enum class Way { shrink_plain, shrink_abort, revoke_shrink, recreate };

bool survivors_way(Env& env, int rank, int n, int rep_i, Way way, Series& s, Report& rep) {
  const char* names[] = {"shrink_plain", "shrink_abort", "revoke_shrink", "recreate"};
  const std::string name = names[int(way)];
  const std::string prefix = name + "-" + std::to_string(rep_i);
  auto c = up(env, options(rank, n, prefix), rep, nullptr, nullptr);
  if (!c) return false;
  const std::string done_key = prefix + "/done";
  if (rank == n - 1) {
    auto v = env.store.fetch(done_key, 120000ms);
    rep.check(v.ok(), name + ": waiting for the survivors: " + (v.ok() ? std::string() : v.error().message()));
    rep.check(c->abort_and_destroy().ok(), name + ": abort on the excluded rank");
    return v.ok();
  }
  bool ok = true;
  int64_t t0 = mono_ns();
  std::unique_ptr<NcclCollectives> next;
  if (way == Way::recreate) {
    c->abort("re-created");
    auto r = connect_nccl_object(options(rank, n - 1, prefix + "-new"), env.store);
    if (r) next = std::move(*r);
    else rep.check(false, name + ": " + r.error().message());
  } else {
    if (way == Way::revoke_shrink) {
      auto st = c->revoke();
      rep.check(st.ok(), name + ": revoke: " + msg(st));
      ok = st.ok();
    }
    if (ok) {
      auto mode = way == Way::shrink_abort ? NcclCollectives::ShrinkMode::abort_parent : NcclCollectives::ShrinkMode::plain;
      auto r = c->shrink({n - 1}, prefix + "-new", mode);
      if (r) next = std::move(*r);
      else rep.check(false, name + ": " + r.error().message());
    }
  }
  if (next) {
    s.add(name + "_ms", ms_since(t0));
    auto st = next->barrier();
    rep.check(st.ok(), name + ": barrier on the new communicator: " + msg(st));
    rep.check(next->destroy().ok(), name + ": destroy the new communicator");
  }
  ok = ok && next != nullptr;
  rep.check(c->abort_and_destroy().ok(), name + ": abort the old communicator");
  if (rank == 0) {
    auto st = env.store.put(done_key, {'1'});
    rep.check(st.ok(), name + ": publishing done: " + msg(st));
  }
  return ok;
}

void lifecycle(Env& env, int rank, int n, const Args& a, Series& s, Report& rep) {
  for (int i = 0; i < a.reps; ++i) {
    const std::string r = std::to_string(i);
    double connect_ms = 0, init_ms = 0;
    {  // create, then the clean destroy
      auto c = up(env, options(rank, n, "create-" + r), rep, &connect_ms, &init_ms);
      if (!c) return;
      s.add("create_ms", connect_ms);
      s.add("init_ms", init_ms);
      int64_t t0 = mono_ns();
      auto st = c->destroy();
      rep.check(st.ok(), "destroy: " + msg(st));
      s.add("destroy_ms", ms_since(t0));
    }
    {  // revoke, then destroy the revoked communicator
      auto c = up(env, options(rank, n, "revoke-" + r), rep, nullptr, nullptr);
      if (!c) return;
      int64_t t0 = mono_ns();
      auto st = c->revoke();
      rep.check(st.ok(), "revoke: " + msg(st));
      s.add("revoke_ms", ms_since(t0));
      t0 = mono_ns();
      st = c->destroy();
      rep.check(st.ok(), "destroy after revoke: " + msg(st));
      s.add("destroy_revoked_ms", ms_since(t0));
    }
    {  // abort
      auto c = up(env, options(rank, n, "abort-" + r), rep, nullptr, nullptr);
      if (!c) return;
      int64_t t0 = mono_ns();
      auto st = c->abort_and_destroy();
      rep.check(st.ok(), "abort: " + msg(st));
      s.add("abort_ms", ms_since(t0));
    }
    if (n >= 2) {
      for (Way w : {Way::shrink_plain, Way::shrink_abort, Way::revoke_shrink, Way::recreate}) {
        if (!survivors_way(env, rank, n, i, w, s, rep)) return;
      }
    }
  }
}

// Per-call latency of all-reduce and all-to-all-v (equal blocks) on one communicator over all ranks.
void latency(Env& env, int rank, int n, const Args& a, Series& s, Report& rep) {
  auto c = up(env, options(rank, n, "latency"), rep, nullptr, nullptr);
  if (!c) return;
  const std::vector<size_t> sizes = {4, size_t(4) << 10, size_t(1) << 20, size_t(64) << 20, size_t(256) << 20};
  Buffer<float> x, y;
  auto sx = x.allocate((sizes.back() / 4) + 1);
  auto sy = y.allocate((sizes.back() / 4) + 1);
  rep.check(sx.ok() && sy.ok(), "allocating the buffers: " + sx.what() + sy.what());
  if (!sx.ok() || !sy.ok()) return;
  rep.check(x.fill_bytes(0).ok() && y.fill_bytes(0).ok(), "zeroing the buffers");
  rep.check(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
  for (size_t bytes : sizes) {
    const size_t floats = bytes / 4;
    const int iters = bytes >= (size_t(64) << 20) ? std::max(5, a.iters / 10) : a.iters;
    const std::string tag = std::to_string(bytes);
    for (int it = -5; it < iters; ++it) {  // 5 warm-up calls
      int64_t t0 = mono_ns();
      auto st = c->allreduce_sum(x.get(), floats);
      double us = double(mono_ns() - t0) / 1e3;
      if (!st.ok()) {
        rep.check(false, "allreduce " + tag + ": " + msg(st));
        return;
      }
      if (it >= 0) s.add("allreduce_us_" + tag, us);
    }
    // All-to-all-v of `bytes` per rank in equal blocks (the remainder stays home).
    std::vector<int64_t> counts(static_cast<size_t>(n), int64_t(floats / size_t(n)));
    counts[size_t(rank)] += int64_t(floats % size_t(n));
    std::vector<int64_t> recv_counts(static_cast<size_t>(n), int64_t(floats / size_t(n)));
    recv_counts[size_t(rank)] = counts[size_t(rank)];
    for (int it = -5; it < iters; ++it) {
      int64_t t0 = mono_ns();
      auto st = c->alltoallv(x.get(), counts, y.get(), recv_counts);
      double us = double(mono_ns() - t0) / 1e3;
      if (!st.ok()) {
        rep.check(false, "alltoallv " + tag + ": " + msg(st));
        return;
      }
      if (it >= 0) s.add("alltoallv_us_" + tag, us);
    }
  }
  // The same all-to-all-v without the count check (what verify_sizes costs).
  auto c2 = up(env, [&] {
    auto o = options(rank, n, "latency-noverify");
    o.verify_sizes = false;
    return o;
  }(), rep, nullptr, nullptr);
  if (!c2) return;
  const size_t floats = (size_t(1) << 20) / 4;
  std::vector<int64_t> counts(static_cast<size_t>(n), int64_t(floats / size_t(n)));
  for (int it = -5; it < a.iters; ++it) {
    int64_t t0 = mono_ns();
    auto st = c2->alltoallv(x.get(), counts, y.get(), counts);
    double us = double(mono_ns() - t0) / 1e3;
    if (!st.ok()) {
      rep.check(false, "alltoallv without verify: " + msg(st));
      return;
    }
    if (it >= 0) s.add("alltoallv_noverify_us", us);
  }
  rep.check(c2->destroy().ok() && c->destroy().ok(), "destroy the latency communicators");
}

// ---------- the parent: statistics and tables ----------

std::vector<double> parse_series(const std::string& report, const std::string& key) {
  std::vector<double> v;
  std::string text = sal::test::report_value(report, key);
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) v.push_back(std::strtod(item.c_str(), nullptr));
  }
  return v;
}

// Element-wise max over the ranks that reported the series (the slowest rank of each repetition).
std::vector<double> slowest(const std::vector<std::string>& reports, const std::string& key) {
  std::vector<double> out;
  for (const auto& r : reports) {
    auto v = parse_series(r, key);
    if (v.empty()) continue;
    if (out.empty()) out = v;
    for (size_t i = 0; i < std::min(out.size(), v.size()); ++i) out[i] = std::max(out[i], v[i]);
  }
  return out;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  double pos = q * double(v.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

std::string human_bytes(size_t b) {
  char buf[32];
  if (b >= (size_t(1) << 20)) std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else if (b >= (size_t(1) << 10)) std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  else std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](int& out) {
      if (i + 1 < argc) out = std::max(1, std::atoi(argv[++i]));
    };
    if (!std::strcmp(argv[i], "--reps")) next(a.reps);
    else if (!std::strcmp(argv[i], "--gpus")) next(a.gpus);
    else if (!std::strcmp(argv[i], "--iters")) next(a.iters);
    else std::fprintf(stderr, "bench_nccl: ignoring unknown argument '%s'\n", argv[i]);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  std::printf("command: %s\n", command.c_str());
  const Args a = parse_args(argc, argv);

  auto probe = sal::test::probe_gpus();
  if (probe.count == 0) {
    std::printf("no GPU: bench_nccl needs at least one CUDA device; nothing was measured\n");
    return 0;
  }
  const int n = a.gpus > 0 ? std::min(a.gpus, probe.count) : probe.count;
  std::printf("libraries: %s (NCCL %s as linked)\n", probe.versions.c_str(), nccl_version_text().c_str());
  for (int i = 0; i < probe.count; ++i) std::printf("GPU %d: %s%s\n", i, probe.names[size_t(i)].c_str(), i < n ? "" : " (unused)");
  std::printf("ranks: %d (one process per GPU), %d repetitions, %d calls per size\n\n", n, a.reps, a.iters);
  std::fflush(stdout);

  Workers w(n, [n, a](int rank, const std::string& ep) {
    Report rep;
    Series s;
    Env env(ep);
    lifecycle(env, rank, n, a, s, rep);
    latency(env, rank, n, a, s, rep);
    s.note_into(rep);
    return rep.text();
  });
  zmq::context_t ctx{1};
  StoreServer server{ctx, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  if (!ep) {
    std::printf("cannot start the store server: %s\n", ep.error().message().c_str());
    return 1;
  }
  w.go(*ep);
  auto reports = w.collect(30 * 60 * 1000);

  bool failed = false;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (reports[r].rfind("OK\n", 0) != 0) {
      failed = true;
      std::printf("rank %zu reported problems:\n", r);
      std::istringstream in(reports[r]);
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("FAIL", 0) == 0 || line.rfind("DIED", 0) == 0 || line.rfind("KILLED", 0) == 0) {
          std::printf("  %s\n", line.c_str());
        }
      }
    }
  }

  std::printf("\nNCCL communicator lifecycle: %d rank(s), 1 per GPU, %d repetitions; ms, the slowest rank of each "
              "repetition\n", n, a.reps);
  std::printf("%-58s %10s %10s %10s\n", "operation", "median", "p90", "min");
  struct Row {
    const char* key;
    const char* label;
    bool needs_two;
  };
  const Row rows[] = {
      {"create_ms", "create: id via store + init until ready", false},
      {"init_ms", "  of which ncclCommInitRankConfig until ready", false},
      {"destroy_ms", "destroy: ncclCommFinalize until quiescent + Destroy", false},
      {"revoke_ms", "revoke: ncclCommRevoke until quiescent", false},
      {"destroy_revoked_ms", "  then ncclCommDestroy of the revoked communicator", false},
      {"abort_ms", "abort: ncclCommAbort", false},
      {"shrink_plain_ms", "shrink without the last rank, NCCL_SHRINK_DEFAULT", true},
      {"shrink_abort_ms", "shrink without the last rank, NCCL_SHRINK_ABORT", true},
      {"revoke_shrink_ms", "revoke + shrink (DEFAULT) without the last rank", true},
      {"recreate_ms", "re-create over the survivors (fresh connect)", true},
  };
  for (const auto& row : rows) {
    if (row.needs_two && n < 2) {
      std::printf("%-58s %s\n", row.label, "not measured: needs 2 GPUs, this run has 1");
      continue;
    }
    auto v = slowest(reports, row.key);
    if (v.empty()) {
      std::printf("%-58s %s\n", row.label, "no data (see the problems above)");
      continue;
    }
    std::printf("%-58s %10.2f %10.2f %10.2f\n", row.label, quantile(v, 0.5), quantile(v, 0.9), quantile(v, 0.0));
  }

  std::printf("\nCollective latency on one communicator over %d rank(s), per call as the worker sees it (rank 0)\n", n);
  std::printf("%-10s %10s %12s %12s %12s %12s\n", "op", "bytes/rank", "median us", "p90 us", "algbw GB/s", "busbw GB/s");
  const std::vector<size_t> sizes = {4, size_t(4) << 10, size_t(1) << 20, size_t(64) << 20, size_t(256) << 20};
  for (const char* op : {"allreduce", "alltoallv"}) {
    for (size_t bytes : sizes) {
      auto v = parse_series(reports[0], std::string(op) + "_us_" + std::to_string(bytes));
      if (v.empty()) continue;
      double med = quantile(v, 0.5);
      double algbw = double(bytes) / (med * 1e-6) / 1e9;
      // nccl-tests' bus bandwidth factors: all-reduce 2(n-1)/n, all-to-all (n-1)/n.
      double factor = std::string(op) == "allreduce" ? 2.0 * (n - 1) / n : double(n - 1) / n;
      std::printf("%-10s %10s %12.1f %12.1f %12.2f %12.2f\n", op, human_bytes(bytes).c_str(), med, quantile(v, 0.9),
                  algbw, algbw * factor);
    }
  }
  auto nv = parse_series(reports[0], "alltoallv_noverify_us");
  if (!nv.empty()) {
    std::printf("%-10s %10s %12.1f %12.1f   (verify_sizes off: the count check's cost is the difference)\n",
                "alltoallv", human_bytes(size_t(1) << 20).c_str(), quantile(nv, 0.5), quantile(nv, 0.9));
  }
  if (n == 1) std::printf("(1 rank: the collectives are local copies; bus bandwidth is 0 by definition)\n");
  return failed ? 1 : 0;
}
