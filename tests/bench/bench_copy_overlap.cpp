// bench_copy_overlap.cpp — what a large device-to-host copy on a stream of its own (a GPU worker's
// snapshot: 12 bytes a parameter, 1.9 GB for gpu_quickstart) costs the work on another stream (the
// training step's). On the H200 (2026-11-30) the steps at a snapshot took about 40 ms more whether
// the snapshot was first staged in device memory or not, while the worker's own pause was 1–2 ms;
// this program tests the first explanation: that the step's small synchronous copies (the loss, the
// counts, the norms) wait behind the big copy on the copy engine, and whether cutting the big copy
// into chunks lets them through. On the H200 (2026-12-04) they did wait, 37 ms, whether the copy
// was one call or chunks enqueued together, and 0.16 ms behind chunks of 8 MB issued one at a time
// (docs/performance.md), which is how a worker now copies a staged snapshot to the host.
//
// For each way of issuing the big copy (whole; in chunks of C MB enqueued at once; or paced, C MB
// at a time, the next enqueued when the last is done, from a thread of its own, as a GPU worker's
// snapshot writer does since 2026-12-04), on stream B: a 4-byte
// device-to-host copy on stream A followed by a wait for A, over and over while the big copy runs,
// and the same for a 4-byte host-to-device copy and for a 256 MB device memset (device work that
// reads and writes HBM), each against its time with nothing else running. Host-timed, as the
// worker sees its own copies. Prints the table last.
//
// Usage: bench_copy_overlap [--gb G] [--chunks MB,MB,...] [--reps N]
//   a chunk written NNp is paced; defaults: 1.9 GB, chunks 0 (whole), 64, 8, 64p, 8p, 1p; 200 small
//   copies alone per kind.
// Exits 0 with a "no GPU" line on a machine without one.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "bench_copy_overlap: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Times {
  double median = 0, worst = 0;
  size_t n = 0;
};

Times summarise(std::vector<double> t) {
  Times s;
  s.n = t.size();
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  s.median = t[t.size() / 2];
  s.worst = t.back();
  return s;
}

struct Buffers {
  char* big_dev = nullptr;
  char* big_host = nullptr;  // pinned
  char* small_dev = nullptr;
  char* small_host = nullptr;  // pinned
  char* work_dev = nullptr;    // the memset's
  size_t big = 0, work = size_t(256) << 20;
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t done = nullptr;
};

bool make(Buffers& x, size_t big) {
  x.big = big;
  return check(cudaMalloc(&x.big_dev, big), "cudaMalloc (big)") &&
         check(cudaMallocHost(&x.big_host, big), "cudaMallocHost (big)") &&
         check(cudaMalloc(&x.small_dev, 4096), "cudaMalloc (small)") &&
         check(cudaMallocHost(&x.small_host, 4096), "cudaMallocHost (small)") &&
         check(cudaMalloc(&x.work_dev, x.work), "cudaMalloc (work)") &&
         check(cudaMemset(x.big_dev, 1, big), "cudaMemset (big)") &&
         check(cudaStreamCreateWithFlags(&x.a, cudaStreamNonBlocking), "stream a") &&
         check(cudaStreamCreateWithFlags(&x.b, cudaStreamNonBlocking), "stream b") &&
         check(cudaEventCreateWithFlags(&x.done, cudaEventDisableTiming), "event") &&
         check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// One small operation on stream A and the wait for it: its host-measured time.
using Op = std::function<bool()>;

double timed(const Op& op) {
  double t0 = now_ms();
  if (!op()) std::exit(1);
  return now_ms() - t0;
}

Times alone(const Op& op, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(timed(op));
  return summarise(t);
}

struct Chunking {
  size_t bytes = 0;  // 0: the whole copy at once
  bool paced = false;
};

void copy_part(Buffers& x, size_t at, size_t n) {
  if (!check(cudaMemcpyAsync(x.big_host + at, x.big_dev + at, n, cudaMemcpyDeviceToHost, x.b), "cudaMemcpyAsync (big)"))
    std::exit(1);
}

// The big copy on stream B as `how` says, and `op` repeated on A until it is done.
Times during(Buffers& x, Chunking how, const Op& op, double& big_ms) {
  const double t0 = now_ms();
  const size_t step = how.bytes == 0 ? x.big : how.bytes;
  std::atomic<bool> over{false};
  std::thread pacer;
  if (how.paced) {
    pacer = std::thread([&] {
      for (size_t at = 0; at < x.big; at += step) {
        copy_part(x, at, std::min(step, x.big - at));
        if (!check(cudaStreamSynchronize(x.b), "cudaStreamSynchronize (a paced chunk)")) std::exit(1);
      }
      over = true;
    });
  } else {
    for (size_t at = 0; at < x.big; at += step) copy_part(x, at, std::min(step, x.big - at));
    check(cudaEventRecord(x.done, x.b), "cudaEventRecord");
  }
  auto running = [&] { return how.paced ? !over.load() : cudaEventQuery(x.done) == cudaErrorNotReady; };
  std::vector<double> t;
  while (running()) t.push_back(timed(op));
  if (pacer.joinable()) pacer.join();
  check(cudaStreamSynchronize(x.b), "cudaStreamSynchronize (b)");
  big_ms = now_ms() - t0;
  return summarise(t);
}

std::vector<Chunking> parse_chunks(const std::string& s) {
  std::vector<Chunking> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back({size_t(std::strtoull(item.c_str(), nullptr, 10)) << 20, !item.empty() && item.back() == 'p'});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double gb = 1.9;
  std::string chunks = "0,64,8,64p,8p,1p";
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gb" && i + 1 < argc)
      gb = std::atof(argv[++i]);
    else if (a == "--chunks" && i + 1 < argc)
      chunks = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_copy_overlap [--gb G] [--chunks MB,MB,...] [--reps N]\n");
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("bench_copy_overlap: no GPU on this machine\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("bench_copy_overlap --gb %.2f --chunks %s --reps %d on %s (%d async copy engines)\n", gb, chunks.c_str(),
              reps, prop.name, prop.asyncEngineCount);
  Buffers x;
  if (!make(x, size_t(gb * double(size_t(1) << 30)))) return 1;
  struct Kind {
    const char* name;
    Op op;
  };
  const Kind kinds[] = {
      {"4 B device->host",
       [&] {
         return check(cudaMemcpyAsync(x.small_host, x.small_dev, 4, cudaMemcpyDeviceToHost, x.a), "d2h") &&
                check(cudaStreamSynchronize(x.a), "sync a");
       }},
      {"4 B host->device",
       [&] {
         return check(cudaMemcpyAsync(x.small_dev, x.small_host, 4, cudaMemcpyHostToDevice, x.a), "h2d") &&
                check(cudaStreamSynchronize(x.a), "sync a");
       }},
      {"256 MB memset",
       [&] {
         return check(cudaMemsetAsync(x.work_dev, 7, x.work, x.a), "memset") &&
                check(cudaStreamSynchronize(x.a), "sync a");
       }},
  };
  std::vector<std::string> rows;
  for (const Kind& k : kinds) {
    alone(k.op, 10);  // warm up
    Times base = alone(k.op, reps);
    char line[256];
    std::snprintf(line, sizeof line, "| %s | alone | %.3f | %.3f | %zu | |", k.name, base.median, base.worst, base.n);
    rows.push_back(line);
    for (Chunking c : parse_chunks(chunks)) {
      double big_ms = 0;
      Times t = during(x, c, k.op, big_ms);
      std::string how = c.bytes == 0 ? "during one copy"
                        : c.paced    ? "during paced chunks of " + std::to_string(c.bytes >> 20) + " MB"
                                     : "during chunks of " + std::to_string(c.bytes >> 20) + " MB";
      std::snprintf(line, sizeof line, "| %s | %s | %.3f | %.3f | %zu | %.1f ms (%.1f GB/s) |", k.name, how.c_str(),
                    t.median, t.worst, t.n, big_ms, double(x.big) / big_ms / 1e6);
      rows.push_back(line);
    }
  }
  std::printf("\n| operation on stream A, then a wait | while | median ms | worst ms | times | the big copy |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | --- |\n");
  for (const auto& r : rows) std::printf("%s\n", r.c_str());
  return 0;
}
