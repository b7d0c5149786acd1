// permute.cu — see permute.h. Kernels, in the order permute_rows runs them:
//   chunk_count_kernel  one warp per chunk of kChunk assignments: per-expert counts of the chunk;
//   tables_kernel       blocks [0, E): per expert, exclusive prefix sums of the chunk counts over
//                       chunks (the chunk's base rank) and of send[e][rank][.] over destinations
//                       (C(e, .)); blocks [E, E+W): per destination i, exclusive prefix sums of
//                       send[.][rank][i] over experts and their total (the rows sent to i);
//   dest_start_kernel   one block: exclusive prefix sums of those totals (start(i));
//   rows_kernel         one warp per chunk again: each assignment's stable rank within its expert
//                       (chunk base + warp-level rank), then its row by binary search of C(e, .).
// Within a chunk a warp walks 32 assignments at a time in order; __match_any_sync groups the lanes
// with the same expert, a lane's rank among them is the popcount of the lower lanes, and the
// lowest lane of the group advances the warp's per-expert counter (shared memory).
//
// The data kernels are warp-per-row: a warp copies or reduces one row of d floats, with 16-byte
// accesses when d % 4 == 0 and the pointers allow it, so every access of a warp is contiguous.
#include "kernels/cuda/permute.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/reduce.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 512;  // assignments per warp in the rank kernels
constexpr int kUnroll = 4;   // independent 16-byte loads per lane in flight in the row copy
constexpr unsigned kFull = reduce::kFullMask;
using reduce::warp_sum;

// ---- positions ----------------------------------------------------------------------------------

// Exclusive prefix sums over [0, n) in index order: store(i, sum of load(i') for i' < i); returns
// the total. Every thread of the block must call it with the same n (it has barriers). One element
// per thread per tile; a thread stores only the index it loaded, so load and store may alias.
template <class Load, class Store>
__device__ int64_t block_exclusive_scan(int n, Load load, Store store, int64_t* warp_total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t carry = 0;
  for (int base = 0; base < n; base += kThreads) {
    const int i = base + int(threadIdx.x);
    const int64_t v = i < n ? load(i) : 0;
    int64_t inclusive = v;
    for (int off = 1; off < 32; off <<= 1) {
      const int64_t up = __shfl_up_sync(kFull, inclusive, off);
      if (lane >= off) inclusive += up;
    }
    if (lane == 31) warp_total[warp] = inclusive;
    __syncthreads();
    int64_t before = 0, tile = 0;
    for (int w = 0; w < kWarps; ++w) {
      const int64_t t = warp_total[w];
      if (w < warp) before += t;
      tile += t;
    }
    if (i < n) store(i, carry + before + inclusive - v);
    carry += tile;
    __syncthreads();  // warp_total is rewritten by the next tile or the next call
  }
  return carry;
}

__device__ inline int expert_of(int32_t id, int E) { return id >= 0 && id < E ? int(id) : -1; }

// counts[chunk][e]: assignments of chunk `chunk` routed to e. Dynamic shared memory: kWarps * E ints.
__global__ void __launch_bounds__(kThreads)
chunk_count_kernel(const int32_t* __restrict__ idx, int n, int E, int nchunks, int32_t* __restrict__ counts) {
  extern __shared__ int32_t run_all[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunk = int(blockIdx.x) * kWarps + warp;
  if (chunk >= nchunks) return;  // the whole warp; this kernel has no block-wide barrier
  int32_t* run = run_all + warp * E;
  for (int e = lane; e < E; e += 32) run[e] = 0;
  __syncwarp();
  const int begin = chunk * kChunk, end = min(n, begin + kChunk);
  for (int base = begin; base < end; base += 32) {
    const int a = base + lane;
    const int v = a < end ? expert_of(idx[a], E) : -1;
    const unsigned same = __match_any_sync(kFull, v);
    if (v >= 0 && lane == __ffs(same) - 1) run[v] += __popc(same);  // one lane per expert
    __syncwarp();
  }
  for (int e = lane; e < E; e += 32) counts[size_t(chunk) * E + e] = run[e];
}

// Blocks [0, E): expert e = blockIdx.x. counts[.][e] becomes the exclusive prefix over chunks (the
// rank of the chunk's first assignment of e); first[e][0..W] = C(e, .), the exclusive prefix of
// send[e][rank][.] with the total at [W].
// Blocks [E, E + W): destination i = blockIdx.x - E. offset[e][i] = sum_{e' < e} send[e'][rank][i];
// dest_rows[i] = the rows sent to i.
__global__ void __launch_bounds__(kThreads)
tables_kernel(int32_t* __restrict__ counts, int nchunks, const uint32_t* __restrict__ send, int E, int W, int rank,
              int64_t* __restrict__ first, int64_t* __restrict__ offset, int64_t* __restrict__ dest_rows) {
  __shared__ int64_t warp_total[kWarps];
  if (int(blockIdx.x) < E) {
    const int e = int(blockIdx.x);
    block_exclusive_scan(
        nchunks, [&](int c) -> int64_t { return counts[size_t(c) * E + e]; },
        [&](int c, int64_t v) { counts[size_t(c) * E + e] = int32_t(v); }, warp_total);
    const uint32_t* row = send + (size_t(e) * W + rank) * W;
    int64_t* f = first + size_t(e) * (W + 1);
    const int64_t total = block_exclusive_scan(
        W, [&](int i) -> int64_t { return row[i]; }, [&](int i, int64_t v) { f[i] = v; }, warp_total);
    if (threadIdx.x == 0) f[W] = total;
  } else {
    const int i = int(blockIdx.x) - E;
    const int64_t total = block_exclusive_scan(
        E, [&](int e) -> int64_t { return send[(size_t(e) * W + rank) * W + i]; },
        [&](int e, int64_t v) { offset[size_t(e) * W + i] = v; }, warp_total);
    if (threadIdx.x == 0) dest_rows[i] = total;
  }
}

// One block: start[i] = sum_{i' < i} dest_rows[i'].
__global__ void __launch_bounds__(kThreads)
dest_start_kernel(const int64_t* __restrict__ dest_rows, int W, int64_t* __restrict__ start) {
  __shared__ int64_t warp_total[kWarps];
  block_exclusive_scan(
      W, [&](int i) -> int64_t { return dest_rows[i]; }, [&](int i, int64_t v) { start[i] = v; }, warp_total);
}

// The send-buffer row of the r-th (0-based, slot order) local assignment of an expert, from that
// expert's C(e, 0..W) (`first`) and offset(e, .) rows; -1 past the schedule or the buffer.
__device__ int32_t row_of(int64_t r, int W, const int64_t* __restrict__ first, const int64_t* __restrict__ offset,
                          const int64_t* __restrict__ start, int64_t capacity) {
  if (r >= first[W]) return -1;
  int lo = 0, hi = W;  // invariant: first[lo] <= r < first[hi]  (first[0] == 0 <= r)
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (first[mid] <= r) lo = mid;
    else hi = mid;
  }
  const int64_t row = start[lo] + offset[lo] + (r - first[lo]);
  return row < capacity ? int32_t(row) : -1;
}

// rows[a] for every assignment of the chunk. Dynamic shared memory: kWarps * E ints.
__global__ void __launch_bounds__(kThreads)
rows_kernel(const int32_t* __restrict__ idx, int n, int E, int W, int nchunks, const int32_t* __restrict__ chunk_base,
            const int64_t* __restrict__ first, const int64_t* __restrict__ offset, const int64_t* __restrict__ start,
            int32_t* __restrict__ rows) {
  extern __shared__ int32_t run_all[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunk = int(blockIdx.x) * kWarps + warp;
  if (chunk >= nchunks) return;  // the whole warp; no block-wide barrier here
  int32_t* run = run_all + warp * E;  // run[e]: rank of e's next assignment
  for (int e = lane; e < E; e += 32) run[e] = chunk_base[size_t(chunk) * E + e];
  __syncwarp();
  const unsigned lower = (1u << lane) - 1u;
  const int begin = chunk * kChunk, end = min(n, begin + kChunk);
  for (int base = begin; base < end; base += 32) {
    const int a = base + lane;
    const int v = a < end ? expert_of(idx[a], E) : -1;
    const unsigned same = __match_any_sync(kFull, v);
    const int r = v >= 0 ? run[v] + __popc(same & lower) : 0;
    __syncwarp();  // every lane has read run[v] before the group's lowest lane advances it
    if (v >= 0 && lane == __ffs(same) - 1) run[v] += __popc(same);
    __syncwarp();
    if (a < end)
      rows[a] = v >= 0 ? row_of(r, W, first + size_t(v) * (W + 1), offset + size_t(v) * W, start, n) : -1;
  }
}

__global__ void __launch_bounds__(kThreads)
histogram_kernel(const int32_t* __restrict__ idx, int n, int E, uint32_t* __restrict__ counts) {
  extern __shared__ uint32_t hist[];
  for (int e = int(threadIdx.x); e < E; e += kThreads) hist[e] = 0;
  __syncthreads();
  for (int a = int(blockIdx.x * kThreads + threadIdx.x); a < n; a += int(gridDim.x) * kThreads) {
    const int v = expert_of(idx[a], E);
    if (v >= 0) atomicAdd(&hist[v], 1u);  // integer atomics: the counts do not depend on the order
  }
  __syncthreads();
  for (int e = int(threadIdx.x); e < E; e += kThreads)
    if (hist[e]) atomicAdd(&counts[e], hist[e]);
}

// Scratch of permute_rows, carved from the caller's workspace (offsets 256-byte aligned).
struct Layout {
  int nchunks = 0;
  size_t counts = 0;     // int32 [nchunks][E]: per-chunk counts, then each chunk's base rank
  size_t first = 0;      // int64 [E][W + 1]: C(e, i)
  size_t offset = 0;     // int64 [E][W]: rows of experts before e in destination i's block
  size_t dest_rows = 0;  // int64 [W]: rows sent to i
  size_t start = 0;      // int64 [W]: first row of destination i
  size_t bytes = 0;
};

size_t align_up(size_t n) { return (n + 255) & ~size_t(255); }

Layout layout(int64_t n, int E, int W) {
  Layout l;
  l.nchunks = int((n + kChunk - 1) / kChunk);
  size_t at = 0;
  l.counts = at, at += align_up(size_t(l.nchunks) * size_t(E) * sizeof(int32_t));
  l.first = at, at += align_up(size_t(E) * (size_t(W) + 1) * sizeof(int64_t));
  l.offset = at, at += align_up(size_t(E) * size_t(W) * sizeof(int64_t));
  l.dest_rows = at, at += align_up(size_t(W) * sizeof(int64_t));
  l.start = at, at += align_up(size_t(W) * sizeof(int64_t));
  l.bytes = at;
  return l;
}

// ---- data ---------------------------------------------------------------------------------------

struct alignas(8) Bf16x4 {
  __nv_bfloat162 lo, hi;
};

__device__ inline void store4(float* dst, int c, float4 v) { reinterpret_cast<float4*>(dst)[c] = v; }
__device__ inline void store4(Bf16* dst, int c, float4 v) {
  reinterpret_cast<Bf16x4*>(dst)[c] = Bf16x4{__floats2bfloat162_rn(v.x, v.y), __floats2bfloat162_rn(v.z, v.w)};
}
__device__ inline void store1(float* dst, int i, float v) { dst[i] = v; }
__device__ inline void store1(Bf16* dst, int i, float v) { dst[i] = __float2bfloat16_rn(v); }

__device__ inline float4 fma4(float w, float4 v, float4 acc) {
  return make_float4(fmaf(w, v.x, acc.x), fmaf(w, v.y, acc.y), fmaf(w, v.z, acc.z), fmaf(w, v.w, acc.w));
}
__device__ inline float4 scale4(float w, float4 v) { return make_float4(w * v.x, w * v.y, w * v.z, w * v.w); }
__device__ inline float dot4(float4 a, float4 b, float acc) {
  return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

__device__ inline bool present(int32_t row, int n) { return row >= 0 && row < n; }

// One warp per assignment a: send_buf[rows[a]] = x[a / k]. kVec: d % 4 == 0, 16-byte aligned x
// and (for fp32) send_buf, 8-byte aligned (bf16) send_buf.
template <bool kVec, class Out>
__global__ void __launch_bounds__(kThreads)
permute_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows, int n, int k, int d,
               Out* __restrict__ send_buf) {
  const int lane = threadIdx.x & 31;
  const int a = int(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (a >= n) return;
  const int32_t row = rows[a];
  if (!present(row, n)) return;
  const float* src = x + size_t(a / k) * d;
  Out* dst = send_buf + size_t(row) * d;
  if constexpr (kVec) {
    const float4* src4 = reinterpret_cast<const float4*>(src);
    const int n4 = d / 4;
    for (int c = lane; c < n4; c += 32 * kUnroll) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = c + 32 * u < n4 ? src4[c + 32 * u] : make_float4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (c + 32 * u < n4) store4(dst, c + 32 * u, v[u]);
    }
  } else {
    for (int c = lane; c < d; c += 32) store1(dst, c, src[c]);
  }
}

// One warp per token t: out[t] = sum_j w[t, j] * rows_in[rows[t, j]], j in order, absent rows
// skipped, from 0. With w null the weights are 1 (the permute's backward: fmaf(1, v, acc) rounds
// exactly like acc + v). The k source rows sit in registers (indices fixed by the unrolled loops).
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
combine_kernel(const float* __restrict__ rows_in, const int32_t* __restrict__ rows, const float* __restrict__ w,
               int tokens, int k, int d, float* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int t = int(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (t >= tokens) return;
  const int n = tokens * k;
  const float* src[kMaxTopK];
  float wt[kMaxTopK];
#pragma unroll
  for (int j = 0; j < kMaxTopK; ++j) {
    src[j] = nullptr;
    wt[j] = 0.0f;
    if (j < k) {
      const size_t a = size_t(t) * k + j;
      const int32_t row = rows[a];
      if (present(row, n)) {
        src[j] = rows_in + size_t(row) * d;
        wt[j] = w ? w[a] : 1.0f;
      }
    }
  }
  float* dst = out + size_t(t) * d;
  if constexpr (kVec) {
    const int n4 = d / 4;
    for (int c = lane; c < n4; c += 32) {
      float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < kMaxTopK; ++j)
        if (src[j]) acc = fma4(wt[j], reinterpret_cast<const float4*>(src[j])[c], acc);
      reinterpret_cast<float4*>(dst)[c] = acc;
    }
  } else {
    for (int c = lane; c < d; c += 32) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxTopK; ++j)
        if (src[j]) acc = fmaf(wt[j], src[j][c], acc);
      dst[c] = acc;
    }
  }
}

// One warp per token t, for each j: d_rows[row] = w * d_out[t]; d_w[t, j] = dot(d_out[t], y[row]).
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
combine_backward_kernel(const float* __restrict__ d_out, const float* __restrict__ y, const int32_t* __restrict__ rows,
                        const float* __restrict__ w, int tokens, int k, int d, float* __restrict__ d_rows,
                        float* __restrict__ d_w) {
  const int lane = threadIdx.x & 31;
  const int t = int(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (t >= tokens) return;
  const int n = tokens * k;
  const float* g = d_out + size_t(t) * d;
  for (int j = 0; j < k; ++j) {
    const size_t a = size_t(t) * k + j;
    const int32_t row = rows[a];
    if (!present(row, n)) {
      if (lane == 0) d_w[a] = 0.0f;
      continue;
    }
    const float wa = w[a];
    const float* yr = y + size_t(row) * d;
    float* dr = d_rows + size_t(row) * d;
    float partial = 0.0f;
    if constexpr (kVec) {
      const int n4 = d / 4;
      for (int c = lane; c < n4; c += 32) {
        const float4 gv = reinterpret_cast<const float4*>(g)[c];
        reinterpret_cast<float4*>(dr)[c] = scale4(wa, gv);
        partial = dot4(gv, reinterpret_cast<const float4*>(yr)[c], partial);
      }
    } else {
      for (int c = lane; c < d; c += 32) {
        dr[c] = wa * g[c];
        partial = fmaf(g[c], yr[c], partial);
      }
    }
    const float dot = warp_sum(partial);
    if (lane == 0) d_w[a] = dot;
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

Status check_shape(const char* fn, int tokens, int k, int d) {
  if (tokens < 0 || k < 1 || k > kMaxTopK || d < 0 || int64_t(tokens) * k > kMaxAssignments)
    return invalid_argument(std::string(fn) + ": tokens = " + std::to_string(tokens) + ", k = " + std::to_string(k) +
                            ", d = " + std::to_string(d) + " (need tokens >= 0, 1 <= k <= " +
                            std::to_string(kMaxTopK) + ", d >= 0, tokens * k <= 2^30)");
  return {};
}

unsigned blocks_for(int64_t warps) { return unsigned((warps + kWarps - 1) / kWarps); }

template <class Out>
Status permute_impl(const Context& ctx, const float* x, const int32_t* rows, int tokens, int k, int d, Out* send_buf,
                    size_t out_align) {
  SAL_CUDA_TRY(check_shape("permute", tokens, k, d));
  const int n = tokens * k;
  if (n == 0 || d == 0) return {};
  if (!x || !rows || !send_buf) return invalid_argument("permute: null x, rows or send_buf");
  const bool vec = d % 4 == 0 && aligned(x, 16) && aligned(send_buf, out_align);
  if (vec)
    permute_kernel<true, Out><<<blocks_for(n), kThreads, 0, ctx.stream()>>>(x, rows, n, k, d, send_buf);
  else
    permute_kernel<false, Out><<<blocks_for(n), kThreads, 0, ctx.stream()>>>(x, rows, n, k, d, send_buf);
  return launch_status("permute_kernel");
}

}  // namespace

Status count_assignments(const Context& ctx, const int32_t* idx, int tokens, int k, int experts, uint32_t* counts) {
  SAL_CUDA_TRY(check_shape("count_assignments", tokens, k, 0));
  if (experts < 0 || experts > kMaxPermuteExperts)
    return invalid_argument("count_assignments: experts = " + std::to_string(experts) + " not in [0, " +
                            std::to_string(kMaxPermuteExperts) + "]");
  if (experts == 0) return {};
  const int n = tokens * k;
  if (!counts || (n > 0 && !idx)) return invalid_argument("count_assignments: null idx or counts");
  SAL_CUDA_TRY(cuda_status(int(cudaMemsetAsync(counts, 0, size_t(experts) * sizeof(uint32_t), ctx.stream())),
                           "cudaMemsetAsync (count_assignments)"));
  if (n == 0) return {};
  int64_t blocks = (int64_t(n) + kThreads * 8 - 1) / (kThreads * 8);
  const int64_t cap = int64_t(ctx.sm_count() > 0 ? ctx.sm_count() : 1) * 4;
  if (blocks > cap) blocks = cap;
  histogram_kernel<<<unsigned(blocks), kThreads, size_t(experts) * sizeof(uint32_t), ctx.stream()>>>(idx, n, experts,
                                                                                                    counts);
  return launch_status("histogram_kernel (count_assignments)");
}

size_t permute_workspace_bytes(int tokens, int k, int experts, int workers) {
  if (tokens < 0 || k < 0 || experts < 0 || workers < 0) return 0;
  return layout(int64_t(tokens) * k, experts, workers).bytes;
}

Status permute_rows(const Context& ctx, const int32_t* idx, int tokens, int k, const uint32_t* send, int experts,
                    int workers, int rank, int32_t* rows, void* workspace, size_t workspace_bytes) {
  SAL_CUDA_TRY(check_shape("permute_rows", tokens, k, 0));
  if (experts < 1 || experts > kMaxPermuteExperts || workers < 1 || rank < 0 || rank >= workers)
    return invalid_argument("permute_rows: experts = " + std::to_string(experts) + ", workers = " +
                            std::to_string(workers) + ", rank = " + std::to_string(rank) + " (need 1 <= experts <= " +
                            std::to_string(kMaxPermuteExperts) + ", 0 <= rank < workers)");
  const int n = tokens * k;
  if (n == 0) return {};
  if (!idx || !send || !rows || !workspace) return invalid_argument("permute_rows: null idx, send, rows or workspace");
  const Layout l = layout(n, experts, workers);
  if (workspace_bytes < l.bytes || !aligned(workspace, 8))
    return invalid_argument("permute_rows: workspace of " + std::to_string(workspace_bytes) + " bytes, need " +
                            std::to_string(l.bytes) + ", 8-byte aligned");
  char* ws = static_cast<char*>(workspace);
  auto* counts = reinterpret_cast<int32_t*>(ws + l.counts);
  auto* first = reinterpret_cast<int64_t*>(ws + l.first);
  auto* offset = reinterpret_cast<int64_t*>(ws + l.offset);
  auto* dest_rows = reinterpret_cast<int64_t*>(ws + l.dest_rows);
  auto* start = reinterpret_cast<int64_t*>(ws + l.start);
  const size_t run_bytes = size_t(kWarps) * experts * sizeof(int32_t);
  const unsigned chunk_blocks = blocks_for(l.nchunks);
  chunk_count_kernel<<<chunk_blocks, kThreads, run_bytes, ctx.stream()>>>(idx, n, experts, l.nchunks, counts);
  SAL_CUDA_TRY(launch_status("chunk_count_kernel (permute_rows)"));
  tables_kernel<<<unsigned(experts + workers), kThreads, 0, ctx.stream()>>>(counts, l.nchunks, send, experts, workers,
                                                                            rank, first, offset, dest_rows);
  SAL_CUDA_TRY(launch_status("tables_kernel (permute_rows)"));
  dest_start_kernel<<<1, kThreads, 0, ctx.stream()>>>(dest_rows, workers, start);
  SAL_CUDA_TRY(launch_status("dest_start_kernel (permute_rows)"));
  rows_kernel<<<chunk_blocks, kThreads, run_bytes, ctx.stream()>>>(idx, n, experts, workers, l.nchunks, counts, first,
                                                                   offset, start, rows);
  return launch_status("rows_kernel (permute_rows)");
}

Status permute(const Context& ctx, const float* x, const int32_t* rows, int tokens, int k, int d, float* send_buf) {
  return permute_impl(ctx, x, rows, tokens, k, d, send_buf, 16);
}

Status permute(const Context& ctx, const float* x, const int32_t* rows, int tokens, int k, int d, Bf16* send_buf) {
  return permute_impl(ctx, x, rows, tokens, k, d, send_buf, 8);
}

Status unpermute_combine(const Context& ctx, const float* y, const int32_t* rows, const float* w, int tokens, int k,
                         int d, float* out) {
  SAL_CUDA_TRY(check_shape("unpermute_combine", tokens, k, d));
  if (tokens == 0 || d == 0) return {};
  if (!y || !rows || !w || !out) return invalid_argument("unpermute_combine: null y, rows, w or out");
  const bool vec = d % 4 == 0 && aligned(y, 16) && aligned(out, 16);
  if (vec)
    combine_kernel<true><<<blocks_for(tokens), kThreads, 0, ctx.stream()>>>(y, rows, w, tokens, k, d, out);
  else
    combine_kernel<false><<<blocks_for(tokens), kThreads, 0, ctx.stream()>>>(y, rows, w, tokens, k, d, out);
  return launch_status("combine_kernel (unpermute_combine)");
}

Status unpermute_combine_backward(const Context& ctx, const float* d_out, const float* y, const int32_t* rows,
                                  const float* w, int tokens, int k, int d, float* d_rows, float* d_w) {
  SAL_CUDA_TRY(check_shape("unpermute_combine_backward", tokens, k, d));
  if (tokens == 0) return {};  // d == 0 still writes d_w (all 0)
  if (!d_out || !y || !rows || !w || !d_rows || !d_w)
    return invalid_argument("unpermute_combine_backward: null d_out, y, rows, w, d_rows or d_w");
  const bool vec = d % 4 == 0 && aligned(d_out, 16) && aligned(y, 16) && aligned(d_rows, 16);
  if (vec)
    combine_backward_kernel<true><<<blocks_for(tokens), kThreads, 0, ctx.stream()>>>(d_out, y, rows, w, tokens, k, d,
                                                                                     d_rows, d_w);
  else
    combine_backward_kernel<false><<<blocks_for(tokens), kThreads, 0, ctx.stream()>>>(d_out, y, rows, w, tokens, k, d,
                                                                                      d_rows, d_w);
  return launch_status("combine_backward_kernel (unpermute_combine_backward)");
}

Status permute_backward(const Context& ctx, const float* d_send, const int32_t* rows, int tokens, int k, int d,
                        float* dx) {
  SAL_CUDA_TRY(check_shape("permute_backward", tokens, k, d));
  if (tokens == 0 || d == 0) return {};
  if (!d_send || !rows || !dx) return invalid_argument("permute_backward: null d_send, rows or dx");
  const bool vec = d % 4 == 0 && aligned(d_send, 16) && aligned(dx, 16);
  if (vec)
    combine_kernel<true><<<blocks_for(tokens), kThreads, 0, ctx.stream()>>>(d_send, rows, nullptr, tokens, k, d, dx);
  else
    combine_kernel<false><<<blocks_for(tokens), kThreads, 0, ctx.stream()>>>(d_send, rows, nullptr, tokens, k, d, dx);
  return launch_status("combine_kernel (permute_backward)");
}

}  // namespace sal::kernels::cuda
