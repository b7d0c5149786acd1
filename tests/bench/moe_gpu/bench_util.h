// bench_util.h — what the sections of bench_moe_gpu (main.cpp) share: failures that are printed
// and counted instead of ending the run (must/check/attempt), the options and the --json output,
// device buffers filled with random data or poisoned, checks that a result is finite or a
// permutation, CUDA-event timing, and the forced routing of torch_moe_layer.py. Host code only: the
// sections without kernels of their own are .cpp files. fill_random and check_finite launch kernels
// private to bench_util.cu, which defines them for float and Bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/buffer.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/status.h"

namespace sal::bench::moe_gpu {

using sal::kernels::cuda::Bf16;
using sal::kernels::cuda::Buffer;
using sal::kernels::cuda::Context;
using sal::kernels::cuda::Status;

// ---- failures ------------------------------------------------------------------------------------

// A failed Status or a failed check, thrown by must/check and caught by attempt(), which prints it
// and counts it (any failure makes the exit status 1).
struct Failure {
  std::string what;
};

void must(const Status& s, const std::string& where);
void must_cuda(cudaError_t e, const std::string& where);
void check(bool ok, const std::string& what);

// Runs f; a Failure is printed (with `what`) and counted instead of ending the program, so one
// broken configuration does not hide the others' figures. Returns whether f succeeded.
// g_failures counts them (defined in bench_util.cu).
extern int g_failures;
template <class F>
bool attempt(const std::string& what, F&& f) {
  try {
    f();
    return true;
  } catch (const Failure& x) {
    ++g_failures;
    std::printf("FAILED %s: %s\n", what.c_str(), x.what.c_str());
    std::fflush(stdout);
    return false;
  }
}

// ---- options and output ----------------------------------------------------------------------------

struct Args {
  int tokens = 16384;
  int warmup = 5;            // untimed passes before the timed ones (as torch_moe_layer.py)
  int iters = 20;            // timed passes per configuration (as torch_moe_layer.py)
  int dispatch_iters = 200;  // timed calls per dispatch measurement (each is tens of microseconds)
  int peak_reps = 10;        // timed calls of each reference measurement
  std::string json;
};

Args parse_args(int argc, char** argv);

// One JSON object per line, keys in the order added. Strings are ours (no quotes or backslashes
// to escape except in the command line and GPU name, which escape() handles).
class JsonLine {
 public:
  JsonLine& str(const char* key, const std::string& v);
  JsonLine& num(const char* key, double v);
  JsonLine& integer(const char* key, long long v);
  std::string text() const;

 private:
  static std::string escape(const std::string& s);
  JsonLine& raw(const char* key, const std::string& v);
  std::string body_;
};

// The --json file, one JsonLine a line, flushed after each; no file (writes do nothing) when the
// path is empty.
class JsonFile {
 public:
  explicit JsonFile(const std::string& path);
  ~JsonFile();
  JsonFile(const JsonFile&) = delete;
  JsonFile& operator=(const JsonFile&) = delete;
  void write(const JsonLine& l);

 private:
  std::FILE* f_ = nullptr;
};

// ---- host helpers ------------------------------------------------------------------------------------

// Threads per block of the benchmark's own kernels.
constexpr int kThreads = 256;

template <class T>
Buffer<T> alloc(size_t n, const char* what) {
  Buffer<T> b;
  must(b.allocate(n), std::string("allocate ") + what);
  return b;
}

// Random data (see fill_random_kernel in bench_util.cu); defined for T = float and Bf16.
template <class T>
void fill_random(const Context& ctx, Buffer<T>& b, uint64_t seed, float std_dev);

// Every byte 0xFF (NaN for floats, -1 for ints), in stream order: what a kernel forgets to write
// stays NaN and fails the finiteness check. (Buffer::fill_bytes uses the legacy stream, which our
// non-blocking stream does not wait for.)
template <class T>
void poison(const Context& ctx, Buffer<T>& b) {
  must_cuda(cudaMemsetAsync(b.get(), 0xFF, b.bytes(), ctx.stream()), "cudaMemsetAsync (poison)");
}

template <class T>
void zero(const Context& ctx, Buffer<T>& b) {
  must_cuda(cudaMemsetAsync(b.get(), 0, b.bytes(), ctx.stream()), "cudaMemsetAsync (zero)");
}

// Copies a buffer out after everything enqueued on the stream has finished.
template <class T>
std::vector<T> download(const Context& ctx, const Buffer<T>& b) {
  must(ctx.synchronize(), "synchronize before download");
  std::vector<T> h;
  must(b.download(&h), "download");
  return h;
}

template <class T>
Buffer<T> upload(const std::vector<T>& h, const char* what) {
  Buffer<T> b;
  must(b.upload(h), std::string("upload ") + what);
  must_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after upload)");  // legacy-stream copy done
  return b;
}

// Fails unless every element of p[0, n) is finite.
// (Defined for T = float and Bf16.)
template <class T>
void check_finite(const Context& ctx, const T* p, size_t n, const std::string& what);

template <class T>
void check_finite(const Context& ctx, const Buffer<T>& b, const std::string& what) {
  check_finite(ctx, b.get(), b.size(), what);
}

// ||a - b|| / ||b|| in double.
double rel_error(const std::vector<float>& a, const std::vector<float>& b);

// rows must be a permutation of [0, n): every assignment has a row and no row is used twice.
void check_permutation(const std::vector<int32_t>& rows, const std::string& what);

class Event {
 public:
  Event() { must_cuda(cudaEventCreate(&e_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Context& ctx) { must_cuda(cudaEventRecord(e_, ctx.stream()), "cudaEventRecord"); }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Mean ms per call of f(i) over `iters` calls after `warmup` untimed ones: CUDA events around the
// whole timed loop (as torch_moe_layer.py times its passes).
template <class F>
double time_loop_ms(const Context& ctx, int warmup, int iters, F&& f) {
  for (int i = 0; i < warmup; ++i) f(i);
  Event start, end;
  must(ctx.synchronize(), "synchronize before timing");
  start.record(ctx);
  for (int i = 0; i < iters; ++i) f(warmup + i);
  end.record(ctx);
  must_cuda(cudaEventSynchronize(end.get()), "cudaEventSynchronize");
  float ms = 0;
  must_cuda(cudaEventElapsedTime(&ms, start.get(), end.get()), "cudaEventElapsedTime");
  return double(ms) / iters;
}

// Each of `reps` calls timed alone (after `warmup`): for the best call and the median.
template <class F>
std::vector<double> time_each_ms(const Context& ctx, int warmup, int reps, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> out;
  Event start, end;
  for (int i = 0; i < reps; ++i) {
    start.record(ctx);
    f();
    end.record(ctx);
    must_cuda(cudaEventSynchronize(end.get()), "cudaEventSynchronize");
    float ms = 0;
    must_cuda(cudaEventElapsedTime(&ms, start.get(), end.get()), "cudaEventElapsedTime");
    out.push_back(double(ms));
  }
  std::sort(out.begin(), out.end());
  return out;
}

double median(const std::vector<double>& sorted);

// ---- forced routing, as torch_moe_layer.py ------------------------------------------------------------

struct Model {
  const char* name;
  int d, experts;
};
// Lazarus Table 1.
inline constexpr Model kModels[] = {{"GPT-S", 768, 8}, {"GPT-M", 1024, 12}, {"GPT-L", 1024, 16}};

// A --json row of a section measured on model `m`: its section, the model's name, d and experts.
inline JsonLine model_line(const char* section, const Model& m) {
  return JsonLine().str("section", section).str("model", m.name).integer("d", m.d).integer("experts", m.experts);
}

// Assignments per expert: the hot quarter (at least one) get `skew` parts, the others 1; the
// remainder one each to the first experts. The same double arithmetic as the Python:
// int(total * w / sum(weights)).
std::vector<int64_t> expert_counts(int64_t tokens, int k, int E, double skew);

// idx [tokens, k]: the tokens*k assignments dealt expert by expert (expert 0's run first), token
// t's j-th choice being assignment j*tokens + t. No expert gets more than `tokens`, so a token's
// k choices are distinct.
std::vector<int32_t> forced_routing(int tokens, int k, const std::vector<int64_t>& counts);

}  // namespace sal::bench::moe_gpu
