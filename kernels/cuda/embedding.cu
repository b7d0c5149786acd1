// embedding.cu — see embedding.h. Forward: one block per row, threads over the columns. Backward:
//   dpos: one thread per (t, c), adding the B rows b*T+t in order (as the CPU);
//   dtok: one block per batch row r; the block leaves unless r is the first row holding its id,
//         otherwise it gathers, tile by tile and in row order, every later row with the same id
//         (a ballot compaction) and adds their dout rows into tok's row, each thread owning columns.
// So every table element is summed by one thread in the CPU's order: no atomics, CPU bits.
#include "kernels/cuda/embedding.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/reduce.cuh"

namespace sal::kernels::cuda {
namespace {

using reduce::kFullMask;

constexpr int kMaxRowThreads = 256;
// Threads of the dtok kernel (the compaction tile is one id per thread).
constexpr int kScatterThreads = 256;
constexpr int kScatterWarps = kScatterThreads / 32;
constexpr int kThreads = 256;

int row_threads(int n) { return reduce::row_threads(n, kMaxRowThreads); }

__global__ void embedding_forward_kernel(const int32_t* __restrict__ ids, const float* __restrict__ tok,
                                         const float* __restrict__ pos, float* __restrict__ out, int T, int C,
                                         int V, int32_t* __restrict__ bad_ids) {
  const size_t r = blockIdx.x;
  const int id = ids[r];
  const bool ok = id >= 0 && id < V;
  if (!ok && threadIdx.x == 0) atomicAdd(bad_ids, 1);  // an integer count: order-free
  const float* pe = pos ? pos + (r % size_t(T)) * C : nullptr;  // null: no position table (moe-llama)
  float* o = out + r * C;
  if (ok) {
    const float* te = tok + size_t(id) * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = pe ? te[c] + pe[c] : te[c];
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = pe ? pe[c] : 0.0f;
  }
}

// dpos[t, c] += sum over b in order of dout[b*T+t, c]; e = t*C + c, grid-stride over T*C.
__global__ void embedding_dpos_kernel(const float* __restrict__ dout, float* __restrict__ dpos, int B, int T,
                                      int C) {
  const size_t n = size_t(T) * C;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += stride) {
    const size_t t = e / size_t(C), c = e % size_t(C);
    float a = dpos[e];
    for (int b = 0; b < B; ++b) a += dout[(size_t(b) * T + t) * C + c];
    dpos[e] = a;
  }
}

// Block r (kScatterThreads threads) adds, into tok's row ids[r], the dout rows r' >= r holding the
// same id, in order, provided no row before r holds it (else an earlier block does the work).
__global__ void embedding_dtok_kernel(const int32_t* __restrict__ ids, const float* __restrict__ dout,
                                      float* __restrict__ dtok, int rows, int C, int V) {
  __shared__ int match[kScatterThreads];
  __shared__ int warp_hits[kScatterWarps];
  const int r = blockIdx.x;
  const int id = ids[r];
  if (id < 0 || id >= V) return;  // the same for the whole block
  int seen = 0;
  for (int i = threadIdx.x; i < r; i += kScatterThreads) seen |= ids[i] == id;
  if (__syncthreads_or(seen)) return;  // block-uniform
  float* trow = dtok + size_t(id) * C;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int base = r; base < rows; base += kScatterThreads) {  // block-uniform bound
    const int i = base + int(threadIdx.x);
    const bool hit = i < rows && ids[i] == id;
    const unsigned mask = __ballot_sync(kFullMask, hit);
    if (lane == 0) warp_hits[warp] = __popc(mask);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < kScatterWarps; ++w) {
      if (w < warp) before += warp_hits[w];
      total += warp_hits[w];
    }
    // Hits keep their row order: earlier warps first, then lower lanes.
    if (hit) match[before + __popc(mask & ((1u << lane) - 1u))] = i;
    __syncthreads();
    if (total > 0) {  // block-uniform
      for (int c = threadIdx.x; c < C; c += kScatterThreads) {
        float a = trow[c];
        for (int j = 0; j < total; ++j) a += dout[size_t(match[j]) * C + c];
        trow[c] = a;
      }
    }
    __syncthreads();  // match and warp_hits are rewritten by the next tile
  }
}

Status bad(const char* fn, const std::string& what) { return invalid_argument(std::string(fn) + ": " + what); }

// Shared size checks; rows = B*T, which must fit an int (the kernels index rows with int).
Status check_sizes(const char* fn, int B, int T, int C, int V, int* rows) {
  if (B < 0) return bad(fn, "B = " + std::to_string(B));
  if (T < 0) return bad(fn, "T = " + std::to_string(T));
  if (C < 0) return bad(fn, "C = " + std::to_string(C));
  if (V < 0) return bad(fn, "V = " + std::to_string(V));
  const long long n = static_cast<long long>(B) * T;
  if (n > INT_MAX) return bad(fn, "B*T = " + std::to_string(n) + " exceeds INT_MAX");
  *rows = int(n);
  return {};
}

}  // namespace

Status embedding_forward(const Context& ctx, const int32_t* ids, const float* tok, const float* pos, float* out,
                         int B, int T, int C, int V, int32_t* bad_ids) {
  constexpr const char* fn = "embedding_forward";
  int rows = 0;
  SAL_CUDA_TRY(check_sizes(fn, B, T, C, V, &rows));
  if (!bad_ids) return bad(fn, "null bad_ids");
  SAL_CUDA_TRY(cuda_status(int(cudaMemsetAsync(bad_ids, 0, sizeof(int32_t), ctx.stream())),
                           "cudaMemsetAsync (embedding_forward bad_ids)"));
  if (rows == 0 || C == 0) return {};
  if (!ids || !tok || !out) return bad(fn, "null pointer argument");
  embedding_forward_kernel<<<unsigned(rows), row_threads(C), 0, ctx.stream()>>>(ids, tok, pos, out, T, C, V,
                                                                                 bad_ids);
  return launch_status("embedding_forward_kernel");
}

Status embedding_backward(const Context& ctx, const int32_t* ids, const float* dout, float* dtok, float* dpos,
                          int B, int T, int C, int V) {
  constexpr const char* fn = "embedding_backward";
  int rows = 0;
  SAL_CUDA_TRY(check_sizes(fn, B, T, C, V, &rows));
  if (rows == 0 || C == 0 || (!dtok && !dpos)) return {};
  if (!dout || (dtok && !ids)) return bad(fn, "null pointer argument");
  if (dpos) {
    embedding_dpos_kernel<<<grid_for(ctx, size_t(T) * C), kThreads, 0, ctx.stream()>>>(dout, dpos, B, T, C);
    SAL_CUDA_TRY(launch_status("embedding_dpos_kernel"));
  }
  if (dtok) {
    embedding_dtok_kernel<<<unsigned(rows), kScatterThreads, 0, ctx.stream()>>>(ids, dout, dtok, rows, C, V);
    SAL_CUDA_TRY(launch_status("embedding_dtok_kernel"));
  }
  return {};
}

}  // namespace sal::kernels::cuda
