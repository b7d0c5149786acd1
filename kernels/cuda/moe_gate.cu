// moe_gate.cu — see moe_gate.h. Elementwise kernels are grid-stride loops; the column sums use a
// block of (32 columns) x (kColSumLanes row lanes), each lane summing its rows in order in double,
// the lanes then added in lane order by the first row of threads.
#include "kernels/cuda/moe_gate.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kColTile = 32;
constexpr int kMaxK = 16;  // softmax.h's kTopKMax

// Block (kColTile, kColSumLanes); block x covers columns [x * kColTile, +kColTile).
__global__ void column_sums_f64_kernel(const float* __restrict__ x, int M, int N, double* __restrict__ out) {
  __shared__ double part[kColSumLanes][kColTile];
  const int col = int(blockIdx.x) * kColTile + int(threadIdx.x);
  double acc = 0.0;
  if (col < N)
    for (int m = int(threadIdx.y); m < M; m += kColSumLanes) acc += double(x[size_t(m) * N + col]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();  // every thread reaches this: nothing above returns early
  if (threadIdx.y == 0 && col < N) {
    double s = 0.0;
    for (int l = 0; l < kColSumLanes; ++l) s += part[l][threadIdx.x];
    out[col] = s;
  }
}

// One thread per element (t, e) of dprobs.
__global__ void gate_dprobs_kernel(const float* __restrict__ aux, const int32_t* __restrict__ idx,
                                   const float* __restrict__ dw, size_t n, int k, int E, float* __restrict__ dprobs) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const size_t t = i / size_t(E);
    const int e = int(i % size_t(E));
    float v = aux[e];
    for (int j = 0; j < k; ++j)
      if (idx[t * k + j] == e) v += dw[t * k + j];
    dprobs[i] = v;
  }
}

// One thread per assignment a = t*k + j.
__global__ void gather_weights_kernel(const float* __restrict__ probs, const int32_t* __restrict__ idx, size_t n,
                                      int k, int E, float* __restrict__ w) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t a = blockIdx.x * size_t(blockDim.x) + threadIdx.x; a < n; a += stride) {
    const int32_t e = idx[a];
    w[a] = (e >= 0 && e < E) ? probs[(a / size_t(k)) * size_t(E) + size_t(e)] : 0.0f;
  }
}

// No __restrict__: y may alias a or b.
__global__ void add_kernel(const float* a, const float* b, float* y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) y[i] = a[i] + b[i];
}

Status bad(const char* fn, const std::string& what) { return invalid_argument(std::string(fn) + ": " + what); }

}  // namespace

Status column_sums_f64(const Context& ctx, const float* x, int M, int N, double* out) {
  constexpr const char* fn = "column_sums_f64";
  if (M < 0 || N < 0) return bad(fn, "M = " + std::to_string(M) + ", N = " + std::to_string(N) + " (need >= 0)");
  if (N == 0) return {};
  if (!out || (M > 0 && !x)) return bad(fn, "null x or out");
  const unsigned blocks = unsigned((N + kColTile - 1) / kColTile);
  column_sums_f64_kernel<<<blocks, dim3(kColTile, kColSumLanes), 0, ctx.stream()>>>(x, M, N, out);
  return launch_status("column_sums_f64_kernel");
}

Status gate_dprobs(const Context& ctx, const float* aux, const int32_t* idx, const float* dw, int tokens, int k,
                   int experts, float* dprobs) {
  constexpr const char* fn = "gate_dprobs";
  if (tokens < 0 || experts < 0)
    return bad(fn, "tokens = " + std::to_string(tokens) + ", experts = " + std::to_string(experts) + " (need >= 0)");
  const size_t n = size_t(tokens) * size_t(experts);
  if (n == 0) return {};
  if (k < 1 || k > kMaxK) return bad(fn, "k = " + std::to_string(k) + " not in [1, 16]");
  if (!aux || !idx || !dw || !dprobs) return bad(fn, "null pointer argument");
  gate_dprobs_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(aux, idx, dw, n, k, experts, dprobs);
  return launch_status("gate_dprobs_kernel");
}

Status gather_weights(const Context& ctx, const float* probs, const int32_t* idx, int tokens, int k, int experts,
                      float* w) {
  constexpr const char* fn = "gather_weights";
  if (tokens < 0 || k < 0 || experts < 0)
    return bad(fn, "tokens = " + std::to_string(tokens) + ", k = " + std::to_string(k) + ", experts = " +
                       std::to_string(experts) + " (need >= 0)");
  const size_t n = size_t(tokens) * size_t(k);
  if (n == 0) return {};
  if (!idx || !w || (experts > 0 && !probs)) return bad(fn, "null pointer argument");
  gather_weights_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(probs, idx, n, k, experts, w);
  return launch_status("gather_weights_kernel");
}

Status add(const Context& ctx, const float* a, const float* b, float* y, size_t n) {
  if (n == 0) return {};
  if (!a || !b || !y) return bad("add", "null pointer argument");
  add_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(a, b, y, n);
  return launch_status("add_kernel");
}

}  // namespace sal::kernels::cuda
