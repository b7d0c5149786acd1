// attention.cu — see attention.h. Per head i = b*H + h, with q, k, v, do the packed bf16 [T, hs]
// blocks and s = 1/sqrt(hs) (the same products as kernels/cpu/attention.cpp, unblocked):
//   forward:  S = s q k^T -> probs;  P = causal softmax(S) in place (+ bf16 copy);  o = P v -> out
//   backward: dP = do v^T;  dS = P * (dP - rowsum(P * dP)) (bf16);  dq = s dS k;  dk = s dS^T q;
//             dv = P^T do;  dq, dk, dv -> dqkv
// Scratch regions (each starting on a 256-byte boundary), N = B*T*C, P = B*H*T*T:
//   qb kb vb db  bf16 [N]  packed heads of q, k, v, dout
//   pb sb        bf16 [P]  P and dS as GEMM operands
//   dp           fp32 [P]  dP
//   f0 f1 f2     fp32 [N]  o (forward); dq, dk, dv (backward), unpacked into out / dqkv
#include "kernels/cuda/attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kAlign = 256;

// Where element (b, t, j) of a [B*T, C] row-major matrix (flat index e) lives in the packed
// [B*H, T, hs] layout: head h = j / hs, column c = j % hs.
__device__ inline size_t packed_index(size_t e, int T, int C, int H, int hs) {
  const size_t bt = e / C;
  const int j = int(e % C);
  const size_t b = bt / T, t = bt % T;
  const int h = j / hs, c = j % hs;
  return ((b * H + h) * T + t) * hs + c;
}

// dst (packed bf16) = src, src [B*T, C] columns of a matrix with row stride src_ld. n = B*T*C.
__global__ void pack_heads_kernel(const float* __restrict__ src, int src_ld, Bf16* __restrict__ dst, int T, int C,
                                  int H, int hs, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += stride)
    dst[packed_index(e, T, C, H, hs)] = __float2bfloat16_rn(src[(e / C) * src_ld + e % C]);
}

// dst [B*T, C] columns of a matrix with row stride dst_ld = src (packed fp32). n = B*T*C.
__global__ void unpack_heads_kernel(const float* __restrict__ src, float* __restrict__ dst, int dst_ld, int T, int C,
                                    int H, int hs, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += stride)
    dst[(e / C) * dst_ld + e % C] = src[packed_index(e, T, C, H, hs)];
}

// Block-wide max (kMax) or sum of v; every thread gets the result. blockDim.x a multiple of 32,
// every thread of the block must call it. red: 32 floats of shared memory. The order of the
// combination is fixed (shuffle tree, then warps in index order): deterministic.
template <bool kMax>
__device__ float block_reduce(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // a previous call's readers of red are done
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int i = 1; i < warps; ++i) r = kMax ? fmaxf(r, red[i]) : r + red[i];
  return r;
}

// One block per row of probs [B*H*T, T]; row r is query t = r % T. On entry the row holds the
// scaled scores; on exit softmax over keys [0, t], zeros after; pb gets the same in bf16.
__global__ void causal_softmax_kernel(float* __restrict__ probs, Bf16* __restrict__ pb, int T) {
  __shared__ float red[32];
  const size_t row = blockIdx.x;
  const int t = int(row % T);
  float* p = probs + row * T;
  Bf16* pr = pb + row * T;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) mx = fmaxf(mx, p[j]);
  mx = block_reduce<true>(mx, red);
  float sum = 0.0f;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) sum += expf(p[j] - mx);
  sum = block_reduce<false>(sum, red);
  const float inv = 1.0f / sum;
  // Each thread rewrites only the elements it read itself; all reads of other threads' elements
  // ended before the reductions' barriers.
  for (int j = threadIdx.x; j < T; j += blockDim.x) {
    const float v = j <= t ? expf(p[j] - mx) * inv : 0.0f;
    p[j] = v;
    pr[j] = __float2bfloat16_rn(v);
  }
}

// One block per row: ds = P * (dP - sum_j P dP) over keys [0, t], zeros after, as bf16; pb = P
// as bf16 (zeros after t whatever probs holds there).
__global__ void causal_softmax_grad_kernel(const float* __restrict__ probs, const float* __restrict__ dp,
                                           Bf16* __restrict__ pb, Bf16* __restrict__ ds, int T) {
  __shared__ float red[32];
  const size_t row = blockIdx.x;
  const int t = int(row % T);
  const float* p = probs + row * T;
  const float* g = dp + row * T;
  float dot = 0.0f;
  for (int j = threadIdx.x; j <= t; j += blockDim.x) dot += p[j] * g[j];
  dot = block_reduce<false>(dot, red);
  for (int j = threadIdx.x; j < T; j += blockDim.x) {
    const bool in = j <= t;
    const float pj = in ? p[j] : 0.0f;
    pb[row * T + j] = __float2bfloat16_rn(pj);
    ds[row * T + j] = __float2bfloat16_rn(in ? pj * (g[j] - dot) : 0.0f);
  }
}

// Threads per softmax row: T rounded up to a warp, at most kThreads.
int row_threads(int T) { return std::min(kThreads, (T + 31) / 32 * 32); }

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Shape {
  int B, T, C, H, hs, BH;
  size_t N, P;         // B*T*C, B*H*T*T
  long long head, tt;  // batch strides of one head's [T, hs] and [T, T] matrices
  float scale;
};

struct Regions {
  Bf16 *qb, *kb, *vb, *db, *pb, *sb;
  float *dp, *f0, *f1, *f2;
};

Regions carve(void* scratch, const Shape& s) {
  char* p = static_cast<char*>(scratch);
  auto take = [&](size_t bytes) {
    char* r = p;
    p += align_up(bytes);
    return r;
  };
  Regions r;
  r.qb = reinterpret_cast<Bf16*>(take(s.N * sizeof(Bf16)));
  r.kb = reinterpret_cast<Bf16*>(take(s.N * sizeof(Bf16)));
  r.vb = reinterpret_cast<Bf16*>(take(s.N * sizeof(Bf16)));
  r.db = reinterpret_cast<Bf16*>(take(s.N * sizeof(Bf16)));
  r.pb = reinterpret_cast<Bf16*>(take(s.P * sizeof(Bf16)));
  r.sb = reinterpret_cast<Bf16*>(take(s.P * sizeof(Bf16)));
  r.dp = reinterpret_cast<float*>(take(s.P * sizeof(float)));
  r.f0 = reinterpret_cast<float*>(take(s.N * sizeof(float)));
  r.f1 = reinterpret_cast<float*>(take(s.N * sizeof(float)));
  r.f2 = reinterpret_cast<float*>(take(s.N * sizeof(float)));
  return r;
}

size_t scratch_bytes_for(size_t N, size_t P) {
  return 4 * align_up(N * sizeof(Bf16)) + 2 * align_up(P * sizeof(Bf16)) + align_up(P * sizeof(float)) +
         3 * align_up(N * sizeof(float));
}

// The CPU's checks (C divisible by H), plus what the launches need (grid sizes within int range).
Status make_shape(const char* fn, int B, int T, int C, int H, Shape* s) {
  const std::string f(fn);
  if (B < 0 || T < 0 || H < 1 || C < H || C % H != 0)
    return invalid_argument(f + ": needs B, T >= 0 and C divisible by H >= 1 (B " + std::to_string(B) + ", T " +
                            std::to_string(T) + ", C " + std::to_string(C) + ", H " + std::to_string(H) + ")");
  if ((long long)B * H * T > INT_MAX)
    return invalid_argument(f + ": B*H*T " + std::to_string((long long)B * H * T) + " exceeds INT_MAX");
  s->B = B, s->T = T, s->C = C, s->H = H, s->hs = C / H, s->BH = B * H;
  s->N = size_t(B) * T * C;
  s->P = size_t(B) * H * T * T;
  s->head = (long long)T * s->hs;
  s->tt = (long long)T * T;
  s->scale = 1.0f / std::sqrt(float(s->hs));
  return {};
}

Status check_scratch(const char* fn, const Shape& s, void* scratch, size_t scratch_bytes) {
  const size_t need = scratch_bytes_for(s.N, s.P);
  if (!scratch) return invalid_argument(std::string(fn) + ": null scratch");
  if (scratch_bytes < need)
    return invalid_argument(std::string(fn) + ": scratch_bytes " + std::to_string(scratch_bytes) + " < " +
                            std::to_string(need));
  return {};
}

Status pack(const Context& ctx, const Shape& s, const float* src, int src_ld, Bf16* dst) {
  pack_heads_kernel<<<grid_for(ctx, s.N), kThreads, 0, ctx.stream()>>>(src, src_ld, dst, s.T, s.C, s.H, s.hs, s.N);
  return launch_status("pack_heads_kernel");
}

// q, k and v of every head out of qkv [B*T, 3C], as bf16 into the scratch's qb, kb and vb.
Status pack_qkv(const Context& ctx, const Shape& s, const float* qkv, const Regions& r) {
  SAL_CUDA_TRY(pack(ctx, s, qkv, 3 * s.C, r.qb));
  SAL_CUDA_TRY(pack(ctx, s, qkv + s.C, 3 * s.C, r.kb));
  return pack(ctx, s, qkv + 2 * s.C, 3 * s.C, r.vb);
}

Status unpack(const Context& ctx, const Shape& s, const float* src, float* dst, int dst_ld) {
  unpack_heads_kernel<<<grid_for(ctx, s.N), kThreads, 0, ctx.stream()>>>(src, dst, dst_ld, s.T, s.C, s.H, s.hs, s.N);
  return launch_status("unpack_heads_kernel");
}

}  // namespace

size_t attention_scratch_bytes(int B, int T, int C, int H) {
  if (B < 0 || T < 0 || C < 0 || H < 1) return 0;
  const size_t N = size_t(B) * T * C, P = size_t(B) * H * T * T;
  return scratch_bytes_for(N, P);
}

Status attention_forward(const Context& ctx, const float* qkv, float* out, float* probs, int B, int T, int C, int H,
                         void* scratch, size_t scratch_bytes) {
  Shape s;
  SAL_CUDA_TRY(make_shape("attention_forward", B, T, C, H, &s));
  if (B == 0 || T == 0) return {};
  if (!qkv || !out || !probs)
    return invalid_argument(std::string("attention_forward: null ") + (!qkv ? "qkv" : !out ? "out" : "probs"));
  SAL_CUDA_TRY(check_scratch("attention_forward", s, scratch, scratch_bytes));
  const Regions r = carve(scratch, s);
  const int hs = s.hs;
  const long long head = s.head, tt = s.tt;
  SAL_CUDA_TRY(pack_qkv(ctx, s, qkv, r));
  // S = scale q k^T, straight into probs.
  SAL_CUDA_TRY(gemm_strided_batched(ctx, false, true, T, T, hs, s.scale, r.qb, hs, head, r.kb, hs, head, 0.0f, probs,
                                    T, tt, s.BH));
  causal_softmax_kernel<<<unsigned(s.BH) * unsigned(T), row_threads(T), 0, ctx.stream()>>>(probs, r.pb, T);
  SAL_CUDA_TRY(launch_status("causal_softmax_kernel"));
  // o = P v, then into out's head columns.
  SAL_CUDA_TRY(gemm_strided_batched(ctx, false, false, T, hs, T, 1.0f, r.pb, T, tt, r.vb, hs, head, 0.0f, r.f0, hs,
                                    head, s.BH));
  return unpack(ctx, s, r.f0, out, C);
}

Status attention_backward(const Context& ctx, const float* dout, const float* qkv, const float* probs, float* dqkv,
                          int B, int T, int C, int H, void* scratch, size_t scratch_bytes) {
  Shape s;
  SAL_CUDA_TRY(make_shape("attention_backward", B, T, C, H, &s));
  if (B == 0 || T == 0) return {};
  if (!dout || !qkv || !probs || !dqkv)
    return invalid_argument(std::string("attention_backward: null ") +
                            (!dout ? "dout" : !qkv ? "qkv" : !probs ? "probs" : "dqkv"));
  SAL_CUDA_TRY(check_scratch("attention_backward", s, scratch, scratch_bytes));
  const Regions r = carve(scratch, s);
  const int hs = s.hs;
  const long long head = s.head, tt = s.tt;
  SAL_CUDA_TRY(pack_qkv(ctx, s, qkv, r));
  SAL_CUDA_TRY(pack(ctx, s, dout, C, r.db));
  // dP = do v^T; dS and a bf16 P from it.
  SAL_CUDA_TRY(gemm_strided_batched(ctx, false, true, T, T, hs, 1.0f, r.db, hs, head, r.vb, hs, head, 0.0f, r.dp, T,
                                    tt, s.BH));
  causal_softmax_grad_kernel<<<unsigned(s.BH) * unsigned(T), row_threads(T), 0, ctx.stream()>>>(probs, r.dp, r.pb,
                                                                                               r.sb, T);
  SAL_CUDA_TRY(launch_status("causal_softmax_grad_kernel"));
  // dq = scale dS k;  dk = scale dS^T q;  dv = P^T do.
  SAL_CUDA_TRY(gemm_strided_batched(ctx, false, false, T, hs, T, s.scale, r.sb, T, tt, r.kb, hs, head, 0.0f, r.f0,
                                    hs, head, s.BH));
  SAL_CUDA_TRY(gemm_strided_batched(ctx, true, false, T, hs, T, s.scale, r.sb, T, tt, r.qb, hs, head, 0.0f, r.f1, hs,
                                    head, s.BH));
  SAL_CUDA_TRY(gemm_strided_batched(ctx, true, false, T, hs, T, 1.0f, r.pb, T, tt, r.db, hs, head, 0.0f, r.f2, hs,
                                    head, s.BH));
  SAL_CUDA_TRY(unpack(ctx, s, r.f0, dqkv, 3 * C));
  SAL_CUDA_TRY(unpack(ctx, s, r.f1, dqkv + C, 3 * C));
  return unpack(ctx, s, r.f2, dqkv + 2 * C, 3 * C);
}

}  // namespace sal::kernels::cuda
