// dispatch.cu — see dispatch.h. The schedule kernel runs a 2-D grid: x is the expert, y a band of
// source rows j of that expert's send matrix. Every block recomputes its expert's quotas and
// prefix sums (O(workers), a few microseconds) so that a large send matrix (workers^2 entries per
// expert) is written by many blocks at once; only the y == 0 block writes quota and the error flag.
#include "kernels/cuda/dispatch.h"

#include <cuda_runtime.h>

#include <string>

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Send entries one block writes, at most (fewer when one row is longer).
constexpr int kEntriesPerBlock = 1 << 16;

__device__ inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
__device__ inline uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
__device__ inline uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

// Exclusive prefix sums of a[0, n) in shared memory, in place, in index order; returns the total.
// Every thread of the block must call it with the same n (it has barriers). One element per
// thread per tile: each thread reads and then writes only its own element, and the trailing
// barrier of each tile protects warp_total before it is reused.
__device__ uint64_t block_exclusive_scan(uint64_t* a, int n, uint64_t* warp_total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t carry = 0;
  for (int base = 0; base < n; base += kThreads) {
    const int i = base + int(threadIdx.x);
    const uint64_t v = i < n ? a[i] : 0;
    uint64_t inclusive = v;
    for (int off = 1; off < 32; off <<= 1) {
      const uint64_t up = __shfl_up_sync(0xffffffffu, inclusive, off);
      if (lane >= off) inclusive += up;
    }
    if (lane == 31) warp_total[warp] = inclusive;
    __syncthreads();
    uint64_t before = 0, tile = 0;
    for (int w = 0; w < kWarps; ++w) {
      const uint64_t t = warp_total[w];
      if (w < warp) before += t;
      tile += t;
    }
    if (i < n) a[i] = carry + before + inclusive - v;
    carry += tile;
    __syncthreads();
  }
  return carry;
}

// One expert (blockIdx.x), source rows [blockIdx.y * rows_per_block, +rows_per_block).
__global__ void __launch_bounds__(kThreads)
schedule_kernel(const uint32_t* __restrict__ tokens, const uint32_t* __restrict__ units, int W, int rows_per_block,
                uint32_t* __restrict__ send, uint32_t* __restrict__ quota, int* __restrict__ bad_expert) {
  __shared__ uint32_t tok[kMaxDispatchWorkers];  // T_j
  __shared__ uint32_t quo[kMaxDispatchWorkers];  // q_j
  __shared__ uint64_t a[kMaxDispatchWorkers];    // units -> first unit U_j; then surplus -> S_j
  __shared__ uint64_t b[kMaxDispatchWorkers];    // tokens (for the total); then spare -> P_j
  __shared__ uint64_t warp_total[kWarps];
  const int e = int(blockIdx.x);
  const bool writes_quota = blockIdx.y == 0;
  const uint32_t* T = tokens + size_t(e) * W;
  const uint32_t* R = units + size_t(e) * W;
  for (int j = int(threadIdx.x); j < W; j += kThreads) {
    tok[j] = T[j];
    a[j] = R[j];
    b[j] = T[j];
  }
  __syncthreads();
  const uint64_t r = block_exclusive_scan(a, W, warp_total);      // a[j] = U_j, r = units in all
  const uint64_t total = block_exclusive_scan(b, W, warp_total);  // b is scratch now
  // Unit u (0-based, worker-major) gets `base` tokens, one more when u < extra. Worker j's units
  // are [U_j, U_j + R_j), so extra_j = clamp(extra - U_j, 0, R_j). The CPU sums uint32 per unit;
  // the truncation below is the same value mod 2^32.
  const uint64_t base = r == 0 ? 0 : total / r, extra = r == 0 ? 0 : total % r;
  for (int j = int(threadIdx.x); j < W; j += kThreads) {
    const uint64_t first_unit = a[j], n_units = R[j];
    const uint64_t extra_j = extra > first_unit ? min_u64(extra - first_unit, n_units) : 0;
    const uint32_t q = uint32_t(n_units * base + extra_j);
    const uint32_t keep = min_u32(tok[j], q);
    quo[j] = q;
    a[j] = tok[j] - keep;  // surplus s_j
    b[j] = q - keep;       // spare p_j
    if (writes_quota) quota[size_t(e) * W + j] = q;
  }
  // No replica: the CPU call fails. Here q == 0, so no spare, so every send entry below is 0.
  if (writes_quota && threadIdx.x == 0 && r == 0 && total > 0)
    atomicMin(reinterpret_cast<unsigned int*>(bad_expert), unsigned(e));
  __syncthreads();
  block_exclusive_scan(a, W, warp_total);  // a[j] = S_j
  block_exclusive_scan(b, W, warp_total);  // b[i] = P_i
  const int j0 = int(blockIdx.y) * rows_per_block;
  const int j1 = min(W, j0 + rows_per_block);
  const int count = (j1 - j0) * W;
  uint32_t* out = send + (size_t(e) * W + j0) * W;
  for (int x = int(threadIdx.x); x < count; x += kThreads) {
    const int j = j0 + x / W, i = x % W;
    const uint32_t keep_j = min_u32(tok[j], quo[j]);
    const uint64_t s_lo = a[j], s_hi = s_lo + (tok[j] - keep_j);
    const uint64_t p_lo = b[i], p_hi = p_lo + (quo[i] - min_u32(tok[i], quo[i]));
    const uint64_t lo = max_u64(s_lo, p_lo), hi = min_u64(s_hi, p_hi);
    uint32_t n = hi > lo ? uint32_t(hi - lo) : 0;
    // A source has no spare and a sink no surplus, so the overlap on the diagonal is 0.
    if (i == j) n += keep_j;
    out[x] = n;
  }
}

// One thread per worker p: what `rank` sends to p and receives from p, summed over experts.
__global__ void row_counts_kernel(const uint32_t* __restrict__ send, int E, int W, int rank,
                                  int64_t* __restrict__ send_rows, int64_t* __restrict__ recv_rows) {
  const int p = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (p >= W) return;
  int64_t out = 0, in = 0;
  for (int e = 0; e < E; ++e) {
    const uint32_t* s = send + size_t(e) * W * W;
    out += s[size_t(rank) * W + p];
    in += s[size_t(p) * W + rank];
  }
  send_rows[p] = out;
  recv_rows[p] = in;
}

}  // namespace

Status flexible_dispatch(const Context& ctx, const uint32_t* tokens, const uint32_t* units, int experts, int workers,
                         uint32_t* send, uint32_t* quota, int* bad_expert) {
  if (experts < 0 || workers < 0 || workers > kMaxDispatchWorkers)
    return invalid_argument("flexible_dispatch: experts = " + std::to_string(experts) + ", workers = " +
                            std::to_string(workers) + " (workers at most " + std::to_string(kMaxDispatchWorkers) + ")");
  if (!bad_expert) return invalid_argument("flexible_dispatch: bad_expert is null");
  const bool empty = experts == 0 || workers == 0;
  if (!empty && (!tokens || !units || !send || !quota))
    return invalid_argument("flexible_dispatch: null tokens, units, send or quota");
  // 0xFFFFFFFF: -1 as an int, and the identity of the unsigned atomicMin that reports an expert.
  SAL_CUDA_TRY(cuda_status(int(cudaMemsetAsync(bad_expert, 0xFF, sizeof(int), ctx.stream())),
                           "cudaMemsetAsync (flexible_dispatch error flag)"));
  if (empty) return {};
  const int rows_per_block = workers >= kEntriesPerBlock ? 1 : kEntriesPerBlock / workers;
  const dim3 grid(unsigned(experts), unsigned((workers + rows_per_block - 1) / rows_per_block));
  schedule_kernel<<<grid, kThreads, 0, ctx.stream()>>>(tokens, units, workers, rows_per_block, send, quota,
                                                       bad_expert);
  return launch_status("schedule_kernel (flexible_dispatch)");
}

Status dispatch_row_counts(const Context& ctx, const uint32_t* send, int experts, int workers, int rank,
                           int64_t* send_rows, int64_t* recv_rows) {
  if (experts < 0 || workers < 0)
    return invalid_argument("dispatch_row_counts: experts = " + std::to_string(experts) +
                            ", workers = " + std::to_string(workers));
  if (workers == 0) return {};
  if (rank < 0 || rank >= workers)
    return invalid_argument("dispatch_row_counts: rank = " + std::to_string(rank) + " not in [0, " +
                            std::to_string(workers) + ")");
  if (!send_rows || !recv_rows || (experts > 0 && !send))
    return invalid_argument("dispatch_row_counts: null send, send_rows or recv_rows");
  const int threads = 128;
  row_counts_kernel<<<unsigned((workers + threads - 1) / threads), threads, 0, ctx.stream()>>>(
      send, experts, workers, rank, send_rows, recv_rows);
  return launch_status("row_counts_kernel (dispatch_row_counts)");
}

}  // namespace sal::kernels::cuda
