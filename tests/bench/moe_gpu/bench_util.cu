// bench_util.cu — the shared part of bench_moe_gpu declared in bench_util.h: failures, option
// parsing, the random-fill and finiteness kernels (private here) and their launchers, the host-side
// checks, and the forced routing of torch_moe_layer.py.
#include "tests/bench/moe_gpu/bench_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/buffer.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/status.h"

namespace sal::bench::moe_gpu {

using namespace sal::kernels::cuda;

namespace {

// ---- private kernels: random fill, finiteness --------------------------------------------------------

__device__ inline uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ inline void store(float* p, size_t i, float v) { p[i] = v; }
__device__ inline void store(Bf16* p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline float widen(float v) { return v; }
__device__ inline float widen(Bf16 v) { return __bfloat162float(v); }

// p[i] uniform in [-a, a) with a = std * sqrt(3) (standard deviation `std`), from (seed, i) alone.
// Random data, never zeros: zeros hide unwritten outputs and can run faster than real data.
template <class T>
__global__ void fill_random_kernel(T* p, size_t n, uint64_t seed, float std_dev) {
  const float a = std_dev * 1.7320508f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float u = float(splitmix(seed * 0x2545F4914F6CDD1Dull + i) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    store(p, i, a * (2.0f * u - 1.0f));
  }
}

// *bad += the elements of p[0, n) that are NaN or infinite (integer atomics: an exact count).
template <class T>
__global__ void count_nonfinite_kernel(const T* p, size_t n, unsigned long long* bad) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (!isfinite(widen(p[i]))) ++c;
  if (c) atomicAdd(bad, c);
}

unsigned blocks(const Context& ctx, size_t n) {
  const size_t want = (n + kThreads - 1) / kThreads;
  return unsigned(std::max<size_t>(1, std::min<size_t>(want, size_t(std::max(1, ctx.sm_count())) * 16)));
}

}  // namespace

// ---- failures ------------------------------------------------------------------------------------

void must(const Status& s, const std::string& where) {
  if (!s.ok()) throw Failure{where + ": " + s.what()};
}

void must_cuda(cudaError_t e, const std::string& where) { must(cuda_status(int(e), where.c_str()), where); }

void check(bool ok, const std::string& what) {
  if (!ok) throw Failure{"check failed: " + what};
}

int g_failures = 0;

// ---- options ---------------------------------------------------------------------------------------

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](int& out) {
      if (i + 1 < argc) out = std::max(1, std::atoi(argv[++i]));
    };
    if (!std::strcmp(argv[i], "--tokens"))
      next(a.tokens);
    else if (!std::strcmp(argv[i], "--warmup"))
      next(a.warmup);
    else if (!std::strcmp(argv[i], "--iters"))
      next(a.iters);
    else if (!std::strcmp(argv[i], "--dispatch-iters"))
      next(a.dispatch_iters);
    else if (!std::strcmp(argv[i], "--peak-reps"))
      next(a.peak_reps);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      a.json = argv[++i];
    else
      std::fprintf(stderr, "bench_moe_gpu: ignoring unknown argument '%s'\n", argv[i]);
  }
  return a;
}

// ---- output ----------------------------------------------------------------------------------------

// Built by appending: "\"" + escape(v) gets a false -Wrestrict from GCC 12 at -O3 (its bug 105329).
JsonLine& JsonLine::str(const char* key, const std::string& v) {
  std::string quoted = "\"";
  quoted += escape(v);
  quoted += '"';
  return raw(key, quoted);
}

JsonLine& JsonLine::num(const char* key, double v) {
  char b[64];
  if (std::isfinite(v))
    std::snprintf(b, sizeof b, "%.6g", v);
  else
    std::snprintf(b, sizeof b, "null");
  return raw(key, b);
}

JsonLine& JsonLine::integer(const char* key, long long v) { return raw(key, std::to_string(v)); }

std::string JsonLine::text() const { return "{" + body_ + "}"; }

std::string JsonLine::escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

JsonLine& JsonLine::raw(const char* key, const std::string& v) {
  body_ += (body_.empty() ? "\"" : ", \"") + std::string(key) + "\": " + v;
  return *this;
}

JsonFile::JsonFile(const std::string& path) {
  if (!path.empty()) {
    f_ = std::fopen(path.c_str(), "w");
    check(f_ != nullptr, "cannot open --json file " + path);
  }
}

JsonFile::~JsonFile() {
  if (f_) std::fclose(f_);
}

void JsonFile::write(const JsonLine& l) {
  if (!f_) return;
  std::fprintf(f_, "%s\n", l.text().c_str());
  std::fflush(f_);
}

// ---- host helpers ------------------------------------------------------------------------------------

template <class T>
void fill_random(const Context& ctx, Buffer<T>& b, uint64_t seed, float std_dev) {
  if (b.size() == 0) return;
  fill_random_kernel<T><<<blocks(ctx, b.size()), kThreads, 0, ctx.stream()>>>(b.get(), b.size(), seed, std_dev);
  must(launch_status("fill_random_kernel"), "fill_random");
}

template void fill_random<float>(const Context&, Buffer<float>&, uint64_t, float);
template void fill_random<Bf16>(const Context&, Buffer<Bf16>&, uint64_t, float);

template <class T>
void check_finite(const Context& ctx, const T* p, size_t n, const std::string& what) {
  if (n == 0) return;
  auto bad = alloc<unsigned long long>(1, "non-finite counter");
  must_cuda(cudaMemsetAsync(bad.get(), 0, sizeof(unsigned long long), ctx.stream()), "cudaMemsetAsync (counter)");
  count_nonfinite_kernel<T><<<blocks(ctx, n), kThreads, 0, ctx.stream()>>>(p, n, bad.get());
  must(launch_status("count_nonfinite_kernel"), "check_finite");
  const auto h = download(ctx, bad);
  if (h[0] != 0)
    throw Failure{what + ": " + std::to_string(h[0]) + " of " + std::to_string(n) + " values are NaN or inf"};
}

template void check_finite<float>(const Context&, const float*, size_t, const std::string&);
template void check_finite<Bf16>(const Context&, const Bf16*, size_t, const std::string&);

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

void check_permutation(const std::vector<int32_t>& rows, const std::string& what) {
  std::vector<char> seen(rows.size(), 0);
  for (size_t a = 0; a < rows.size(); ++a) {
    const int32_t r = rows[a];
    check(r >= 0 && size_t(r) < rows.size(),
          what + ": assignment " + std::to_string(a) + " has row " + std::to_string(r));
    check(!seen[size_t(r)], what + ": row " + std::to_string(r) + " given twice");
    seen[size_t(r)] = 1;
  }
}

double median(const std::vector<double>& sorted) { return sorted[sorted.size() / 2]; }

// ---- forced routing, as torch_moe_layer.py ------------------------------------------------------------

std::vector<int64_t> expert_counts(int64_t tokens, int k, int E, double skew) {
  const int hot = std::max(1, E / 4);
  std::vector<double> w(static_cast<size_t>(E));
  double sum = 0;
  for (int e = 0; e < E; ++e) sum += (w[size_t(e)] = e < hot ? skew : 1.0);
  const int64_t total = tokens * k;
  std::vector<int64_t> counts(static_cast<size_t>(E));
  int64_t given = 0;
  for (int e = 0; e < E; ++e) given += (counts[size_t(e)] = int64_t(double(total) * w[size_t(e)] / sum));
  for (int64_t r = 0; r < total - given; ++r) counts[size_t(r % E)] += 1;
  return counts;
}

std::vector<int32_t> forced_routing(int tokens, int k, const std::vector<int64_t>& counts) {
  std::vector<int32_t> flat;
  for (size_t e = 0; e < counts.size(); ++e) {
    check(counts[e] <= tokens, "an expert would get " + std::to_string(counts[e]) + " of " + std::to_string(tokens) +
                                   " tokens (k choices must be distinct)");
    flat.insert(flat.end(), size_t(counts[e]), int32_t(e));
  }
  std::vector<int32_t> idx(size_t(tokens) * k);
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < k; ++j) idx[size_t(t) * k + j] = flat[size_t(j) * tokens + t];
  return idx;
}

}  // namespace sal::bench::moe_gpu
