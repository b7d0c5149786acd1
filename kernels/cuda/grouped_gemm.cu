// grouped_gemm.cu — see grouped_gemm.h. With R rows in all, F = 4d, the scratch holds
//   wide   [R,F] bf16   forward: x W1, then gelu(h) in place;  backward: gelu(h), then dout W2^T,
//                       then dh in place
//   narrow [R,d] bf16   forward: a W2;  backward: bf16(dout), then dh W1^T
//   ptrs   3 * kChunk device pointers: the A, B, C arrays of one grouped cuBLAS call
// and every step is enqueued on ctx.stream(), so a buffer is reused only after the kernel that
// last read it has finished (our kernels are ordinary launches: they wait for the previous work
// on the stream to complete, cuBLAS's included).
//
// The non-empty experts are handled in chunks of kChunk: one grouped call, and one launch of each
// per-expert epilogue, per chunk. An epilogue learns its experts' row ranges and bias pointers from
// a table passed by value (__grid_constant__, so indexing it needs no local copy): no host-to-device
// copy, nothing that could make the host wait.
//
// Fused mode issues per-expert cuBLASLt products whose epilogues do the bias/GELU work
// (gemm_lt.h); its pre-activations are bf16 in saved.h's storage. check_fused_mode (at the end)
// runs a small problem in fused and per_group modes and compares them.
#include "kernels/cuda/grouped_gemm.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/buffer.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 32;  // non-empty experts per grouped call / epilogue launch
constexpr int kColTile = 32, kRowLanes = 16;  // column sums: see group_colsum_kernel
constexpr size_t kAlign = 256;                // scratch regions start on 256-byte boundaries
constexpr int kMaxWidth = 1 << 22;            // d limit: F / kThreads column blocks fit gridDim.y

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// ---- device helpers ----------------------------------------------------------------------------

// kernels/cpu/activation.h's GELU: x * sigmoid(2u), u = c (x + a x^3).
__device__ inline float gelu(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}

// gelu'(x) = s + 2 x s (1 - s) c (1 + 3 a x^2), s = sigmoid(2u).
__device__ inline float gelu_grad(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  const float s = 1.0f / (1.0f + expf(-2.0f * u));
  const float du = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  return s + 2.0f * x * s * (1.0f - s) * du;
}

__device__ inline float load(const float* p) { return *p; }
__device__ inline float load(const Bf16* p) { return __bfloat162float(*p); }

// Up to kChunk non-empty experts with contiguous rows: the i-th owns rows [begin[i], begin[i+1]),
// vec[i] is its bias (or bias gradient).
template <class P>
struct GroupTable {
  int count;
  int begin[kChunk + 1];
  P vec[kChunk];
};

// The table index of `row` (begin[0] <= row < begin[count]; the ranges are non-empty).
template <class P>
__device__ inline int group_of(const GroupTable<P>& t, int row) {
  int g = 0;
  while (g + 1 < t.count && row >= t.begin[g + 1]) ++g;
  return g;
}

// ---- kernels -----------------------------------------------------------------------------------

// Elementwise ones: grid-stride loops over n.
#define SAL_GRID_STRIDE(i, n)                                                                 \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride_ = size_t(gridDim.x) * blockDim.x; \
       i < (n); i += stride_)

__global__ void round_bf16_kernel(const float* __restrict__ x, Bf16* __restrict__ y, size_t n) {
  SAL_GRID_STRIDE(i, n) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void widen_kernel(const Bf16* __restrict__ x, float* __restrict__ y, size_t n) {
  SAL_GRID_STRIDE(i, n) y[i] = __bfloat162float(x[i]);
}

// a = bf16(gelu(h)), h fp32 (per_group, grouped) or bf16 (fused).
template <class T>
__global__ void gelu_bf16_kernel(const T* __restrict__ h, Bf16* __restrict__ a, size_t n) {
  SAL_GRID_STRIDE(i, n) a[i] = __float2bfloat16_rn(gelu(load(h + i)));
}

// g holds da on entry and dh = da * gelu'(h) on exit (each element read, then written, by one thread).
__global__ void gelu_grad_kernel(const float* __restrict__ h, Bf16* g, size_t n) {
  SAL_GRID_STRIDE(i, n) g[i] = __float2bfloat16_rn(__bfloat162float(g[i]) * gelu_grad(h[i]));
}

// Grid (rows of the chunk, ceil(F / kThreads)): h = float(wide) + b1 (saved), wide = bf16(gelu(h)).
__global__ void bias_gelu_kernel(const __grid_constant__ GroupTable<const float*> t, Bf16* wide, float* h, int F) {
  const int row = t.begin[0] + int(blockIdx.x);
  const int col = int(blockIdx.y) * blockDim.x + threadIdx.x;
  if (col >= F) return;
  const float* b = t.vec[group_of(t, row)];
  const size_t i = size_t(row) * F + col;
  const float v = __bfloat162float(wide[i]) + b[col];
  h[i] = v;
  wide[i] = __float2bfloat16_rn(gelu(v));
}

// Grid (experts of the chunk, ceil(F / kThreads)): dst[i * F + c] = bf16(b_i[c]), the chunk's
// biases in bf16 (fused mode's up-projection wants its bias in its output's type).
__global__ void bias_bf16_kernel(const __grid_constant__ GroupTable<const float*> t, Bf16* __restrict__ dst, int F) {
  const int i = int(blockIdx.x);
  const int c = int(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c < F) dst[size_t(i) * F + c] = __float2bfloat16_rn(t.vec[i][c]);
}

// Grid (rows of the chunk, ceil(d / kThreads)): out = float(narrow) + b2.
__global__ void bias_out_kernel(const __grid_constant__ GroupTable<const float*> t, const Bf16* __restrict__ narrow,
                                float* __restrict__ out, int d) {
  const int row = t.begin[0] + int(blockIdx.x);
  const int col = int(blockIdx.y) * blockDim.x + threadIdx.x;
  if (col >= d) return;
  const float* b = t.vec[group_of(t, row)];
  const size_t i = size_t(row) * d + col;
  out[i] = __bfloat162float(narrow[i]) + b[col];
}

// Grid (ceil(N / kColTile), count), block (kColTile, kRowLanes): vec[g][col] += sum of y[r, col]
// over expert g's rows. Lane l sums rows begin + l, begin + l + kRowLanes, ... in order, then the
// lanes' sums are added in lane order: a fixed order, no atomics.
template <class T>
__global__ void group_colsum_kernel(const __grid_constant__ GroupTable<float*> t, const T* __restrict__ y, int N) {
  __shared__ float part[kRowLanes][kColTile];
  const int g = blockIdx.y;
  const int col = int(blockIdx.x) * kColTile + threadIdx.x;
  const int r0 = t.begin[g], r1 = t.begin[g + 1];
  float acc = 0.0f;
  if (col < N) {
#pragma unroll 4
    for (int r = r0 + int(threadIdx.y); r < r1; r += kRowLanes) acc += load(y + size_t(r) * N + col);
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();  // reached by every thread: nothing above returns early
  if (threadIdx.y == 0 && col < N) {
    float s = 0.0f;
    for (int l = 0; l < kRowLanes; ++l) s += part[l][threadIdx.x];
    t.vec[g][col] += s;
  }
}

// The device pointer arrays of one grouped call: dst[0, kChunk) = A, [kChunk, 2 kChunk) = B,
// [2 kChunk, 3 kChunk) = C.
struct PtrTable {
  int count;
  const void* a[kChunk];
  const void* b[kChunk];
  void* c[kChunk];
};

__global__ void fill_ptrs_kernel(const __grid_constant__ PtrTable t, void** dst) {
  const int i = threadIdx.x;
  if (i >= t.count) return;
  dst[i] = const_cast<void*>(t.a[i]);
  dst[kChunk + i] = const_cast<void*>(t.b[i]);
  dst[2 * kChunk + i] = t.c[i];
}

// ---- host side ---------------------------------------------------------------------------------

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// One expert's activation product, row-major: C[M,N] = op(A) op(B), bf16 in and out, alpha 1, beta 0.
struct Product {
  int M, N, K;
  const Bf16* A;
  int lda;
  const Bf16* B;
  int ldb;
  Bf16* C;
  int ldc;
};

// What both passes work from: the non-empty experts, every expert's first row, the scratch regions.
struct Plan {
  int R = 0;
  std::vector<int> active;  // indices of experts with rows > 0, in order
  std::vector<int> begin;   // [G + 1] first row of each expert
  Bf16* wide = nullptr;
  Bf16* narrow = nullptr;
  void** ptrs = nullptr;
};

Status make_plan(const char* fn, GroupedGemmMode mode, int G, const int* rows, int d, const ExpertParams* experts,
                 const ExpertSaved& saved, void* scratch, size_t scratch_bytes, Plan* plan) {
  const std::string f(fn);
  if (mode != GroupedGemmMode::grouped && mode != GroupedGemmMode::per_group && mode != GroupedGemmMode::fused)
    return invalid_argument(f + ": unknown mode " + std::to_string(int(mode)));
  if (G < 0) return invalid_argument(f + ": G " + std::to_string(G) + " < 0");
  if (d < 1 || d > kMaxWidth) return invalid_argument(f + ": d " + std::to_string(d) + " out of [1, 2^22]");
  if (G > 0 && (!rows || !experts)) return invalid_argument(f + ": null " + (rows ? "experts" : "rows"));
  plan->begin.assign(size_t(G) + 1, 0);
  long long total = 0;
  for (int g = 0; g < G; ++g) {
    if (rows[g] < 0)
      return invalid_argument(f + ": rows[" + std::to_string(g) + "] = " + std::to_string(rows[g]) + " < 0");
    plan->begin[g] = int(total);
    total += rows[g];
    if (total > INT_MAX) return invalid_argument(f + ": more than INT_MAX rows in all");
    if (rows[g] > 0) plan->active.push_back(g);
  }
  plan->begin[G] = int(total);
  plan->R = int(total);
  if (plan->R == 0) return {};
  if (!saved.x || !saved.h) return invalid_argument(f + ": null saved." + (saved.x ? "h" : "x"));
  if (!scratch) return invalid_argument(f + ": null scratch");
  const size_t need = expert_mlp_scratch_bytes(plan->R, d);
  if (scratch_bytes < need)
    return invalid_argument(f + ": scratch_bytes " + std::to_string(scratch_bytes) + " < " + std::to_string(need));
  for (int g : plan->active) {
    const ExpertParams& e = experts[g];
    if (!e.w1 || !e.b1 || !e.w2 || !e.b2)
      return invalid_argument(f + ": expert " + std::to_string(g) + " has a null weight or bias");
  }
  if (mode != GroupedGemmMode::per_group) {
    // Every operand pointer of the grouped call (and of the fused products, their aux and output)
    // is a 16-byte-aligned base plus whole rows of d or 4d bf16 elements: 16-byte aligned iff
    // d % 8 == 0.
    if (d % 8 != 0)
      return invalid_argument(f + ": " + (mode == GroupedGemmMode::fused ? "fused" : "grouped") +
                              " mode needs d % 8 == 0 (d " + std::to_string(d) + "); use per_group");
    if (!aligned16(saved.x) || !aligned16(saved.h) || !aligned16(scratch))
      return invalid_argument(f + ": saved.x, saved.h and scratch must be 16-byte aligned");
    for (int g : plan->active)
      if (!aligned16(experts[g].w1) || !aligned16(experts[g].w2))
        return invalid_argument(f + ": expert " + std::to_string(g) + "'s bf16 weights must be 16-byte aligned");
  }
  const size_t F = 4 * size_t(d);
  char* base = static_cast<char*>(scratch);
  plan->wide = reinterpret_cast<Bf16*>(base);
  plan->narrow = reinterpret_cast<Bf16*>(base + align_up(size_t(plan->R) * F * sizeof(Bf16)));
  plan->ptrs = reinterpret_cast<void**>(base + align_up(size_t(plan->R) * F * sizeof(Bf16)) +
                                        align_up(size_t(plan->R) * size_t(d) * sizeof(Bf16)));
  return {};
}

// The table of active experts [first, first + count) of the plan, with vec[i] = pick(expert).
template <class P, class Pick>
GroupTable<P> table(const Plan& plan, const int* rows, size_t first, int count, Pick pick) {
  GroupTable<P> t{};
  t.count = count;
  for (int i = 0; i < count; ++i) {
    const int g = plan.active[first + i];
    t.begin[i] = plan.begin[g];
    t.vec[i] = pick(g);
  }
  const int last = plan.active[first + count - 1];
  t.begin[count] = plan.begin[last] + rows[last];
  return t;
}

int chunk_count(const Plan& plan, size_t first) { return int(std::min<size_t>(kChunk, plan.active.size() - first)); }

// The activation products of the active experts (same transposes for all), issued as `mode` says.
// Column-major mapping as in gemm.cu: cublas(op(tb), op(ta), m = N, n = M, A' = B, B' = A).
Status run_products(const Context& ctx, GroupedGemmMode mode, bool ta, bool tb, const std::vector<Product>& ps,
                    void** ptrs, const char* what) {
  if (mode == GroupedGemmMode::per_group) {
    for (const Product& p : ps)
      SAL_CUDA_TRY(gemm_bf16(ctx, ta, tb, p.M, p.N, p.K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.0f, p.C, p.ldc));
    return {};
  }
  for (size_t first = 0; first < ps.size(); first += kChunk) {
    const int n = int(std::min<size_t>(kChunk, ps.size() - first));
    PtrTable t{};
    t.count = n;
    std::vector<cublasOperation_t> opa(n, tb ? CUBLAS_OP_T : CUBLAS_OP_N), opb(n, ta ? CUBLAS_OP_T : CUBLAS_OP_N);
    std::vector<int> m(n), nn(n), k(n), lda(n), ldb(n), ldc(n), size(n, 1);
    std::vector<float> alpha(n, 1.0f), beta(n, 0.0f);
    for (int i = 0; i < n; ++i) {
      const Product& p = ps[first + i];
      m[i] = p.N, nn[i] = p.M, k[i] = p.K;
      lda[i] = p.ldb, ldb[i] = p.lda, ldc[i] = p.ldc;
      t.a[i] = p.B, t.b[i] = p.A, t.c[i] = p.C;
    }
    fill_ptrs_kernel<<<1, kChunk, 0, ctx.stream()>>>(t, ptrs);
    SAL_CUDA_TRY(launch_status("fill_ptrs_kernel"));
    void* const* dev = ptrs;
    const cublasStatus_t st = cublasGemmGroupedBatchedEx(
        ctx.blas(), opa.data(), opb.data(), m.data(), nn.data(), k.data(), alpha.data(), dev, CUDA_R_16BF, lda.data(),
        dev + kChunk, CUDA_R_16BF, ldb.data(), beta.data(), ptrs + 2 * kChunk, CUDA_R_16BF, ldc.data(), n,
        size.data(), CUBLAS_COMPUTE_32F);
    SAL_CUDA_TRY(cublas_status(int(st), (std::string("cublasGemmGroupedBatchedEx (") + what + ")").c_str()));
  }
  return {};
}

// Grid of an epilogue over the rows of table t, `width` columns.
template <class P>
dim3 row_grid(const GroupTable<P>& t, int width) {
  return dim3(unsigned(t.begin[t.count] - t.begin[0]), unsigned((width + kThreads - 1) / kThreads));
}

// db_g += column sums of y over each active expert's rows; pick(g) gives db_g.
template <class T, class Pick>
Status column_sums(const Context& ctx, const Plan& plan, const int* rows, const T* y, int N, Pick pick) {
  for (size_t first = 0; first < plan.active.size(); first += kChunk) {
    const int n = chunk_count(plan, first);
    const GroupTable<float*> t = table<float*>(plan, rows, first, n, pick);
    const dim3 grid(unsigned((N + kColTile - 1) / kColTile), unsigned(n));
    group_colsum_kernel<T><<<grid, dim3(kColTile, kRowLanes), 0, ctx.stream()>>>(t, y, N);
    SAL_CUDA_TRY(launch_status("group_colsum_kernel"));
  }
  return {};
}

// The pre-activations in fused mode: bf16, in the first half of saved.h's storage. The forward
// also puts the active experts' b1 in bf16 in the second half (R x F bf16 elements: room for
// every active expert, as each has a row at least) before its products.
Bf16* fused_h(const ExpertSaved& saved) { return reinterpret_cast<Bf16*>(saved.h); }

// Fused forward: per expert, wide = gelu(x W1 + b1) with the pre-activations kept (one cuBLASLt
// product), then out = a W2 + b2 straight into the fp32 output (another).
Status fused_forward(const Context& ctx, const Plan& plan, const int* rows, int d, const ExpertParams* experts,
                     float* out, const ExpertSaved& saved) {
  const int F = 4 * d;
  Bf16* h = fused_h(saved);
  Bf16* b1 = h + size_t(plan.R) * F;  // active expert i's bias at b1 + i * F
  for (size_t first = 0; first < plan.active.size(); first += kChunk) {
    const auto t = table<const float*>(plan, rows, first, chunk_count(plan, first),
                                       [&](int g) { return experts[g].b1; });
    const dim3 grid(unsigned(t.count), unsigned((F + kThreads - 1) / kThreads));
    bias_bf16_kernel<<<grid, kThreads, 0, ctx.stream()>>>(t, b1 + first * F, F);
    SAL_CUDA_TRY(launch_status("bias_bf16_kernel"));
  }
  for (size_t i = 0; i < plan.active.size(); ++i) {
    const int g = plan.active[i];
    const size_t r = size_t(plan.begin[g]);
    const LtProduct up{false, false, rows[g], F, d, saved.x + r * d, d, experts[g].w1, F};
    SAL_CUDA_TRY(gemm_lt_gelu_aux_bias(ctx, up, b1 + i * F, h + r * F, F, plan.wide + r * F, F));
  }
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    const LtProduct down{false, false, rows[g], d, F, plan.wide + r * F, F, experts[g].w2, d};
    SAL_CUDA_TRY(gemm_lt_bias_f32(ctx, down, experts[g].b2, out + r * d, d));
  }
  return {};
}

// db1 += colsum(dh), dW1 += x^T dh, with dh in plan.wide (every mode).
Status up_grads(const Context& ctx, const Plan& plan, const int* rows, int d, const ExpertSaved& saved,
                const ExpertGrads* grads) {
  const int F = 4 * d;
  SAL_CUDA_TRY(column_sums(ctx, plan, rows, static_cast<const Bf16*>(plan.wide), F,
                           [&](int g) { return grads[g].b1; }));
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    SAL_CUDA_TRY(gemm_ld(ctx, true, false, d, F, rows[g], 1.0f, saved.x + r * d, d, plan.wide + r * F, F, 1.0f,
                         grads[g].w1, F));
  }
  return {};
}

// Fused backward, after wide = gelu(h), narrow = bf16(dout) and dW2, db2: per expert
// dh = (dout W2^T) * gelu'(h) in one cuBLASLt product; db1 and dW1; then dx = dh W1^T written
// fp32 by the product itself (no widening pass).
Status fused_backward(const Context& ctx, const Plan& plan, const int* rows, int d, const ExpertParams* experts,
                      const ExpertSaved& saved, float* dx, const ExpertGrads* grads) {
  const int F = 4 * d;
  const Bf16* h = fused_h(saved);
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    const LtProduct back{false, true, rows[g], F, d, plan.narrow + r * d, d, experts[g].w2, d};
    SAL_CUDA_TRY(gemm_lt_dgelu(ctx, back, h + r * F, F, plan.wide + r * F, F));
  }
  SAL_CUDA_TRY(up_grads(ctx, plan, rows, d, saved, grads));
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    SAL_CUDA_TRY(gemm_ld(ctx, false, true, rows[g], d, F, 1.0f, plan.wide + r * F, F, experts[g].w1, F, 0.0f,
                         dx + r * d, d));
  }
  return {};
}

}  // namespace

size_t expert_mlp_scratch_bytes(int total_rows, int d) {
  if (total_rows < 0 || d < 0) return 0;
  const size_t R = size_t(total_rows), D = size_t(d);
  return align_up(R * 4 * D * sizeof(Bf16)) + align_up(R * D * sizeof(Bf16)) + align_up(3 * kChunk * sizeof(void*));
}

Status expert_mlp_forward(const Context& ctx, GroupedGemmMode mode, int G, const int* rows, int d,
                          const ExpertParams* experts, const float* x, float* out, const ExpertSaved& saved,
                          void* scratch, size_t scratch_bytes) {
  Plan plan;
  SAL_CUDA_TRY(make_plan("expert_mlp_forward", mode, G, rows, d, experts, saved, scratch, scratch_bytes, &plan));
  if (plan.R == 0) return {};
  if (!x || !out) return invalid_argument(std::string("expert_mlp_forward: null ") + (x ? "out" : "x"));
  const int F = 4 * d;
  const size_t R = size_t(plan.R);

  // x -> bf16 (kept for dW1 in the backward).
  round_bf16_kernel<<<grid_for(ctx, R * d), kThreads, 0, ctx.stream()>>>(x, saved.x, R * d);
  SAL_CUDA_TRY(launch_status("round_bf16_kernel"));
  if (mode == GroupedGemmMode::fused) return fused_forward(ctx, plan, rows, d, experts, out, saved);

  // wide = x W1 (per expert: [m,d] x [d,F]).
  std::vector<Product> ps;
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    ps.push_back({rows[g], F, d, saved.x + r * d, d, experts[g].w1, F, plan.wide + r * F, F});
  }
  SAL_CUDA_TRY(run_products(ctx, mode, false, false, ps, plan.ptrs, "expert x W1"));

  // h = wide + b1; wide = gelu(h).
  for (size_t first = 0; first < plan.active.size(); first += kChunk) {
    const auto t = table<const float*>(plan, rows, first, chunk_count(plan, first),
                                       [&](int g) { return experts[g].b1; });
    bias_gelu_kernel<<<row_grid(t, F), kThreads, 0, ctx.stream()>>>(t, plan.wide, saved.h, F);
    SAL_CUDA_TRY(launch_status("bias_gelu_kernel"));
  }

  // narrow = gelu(h) W2 (per expert: [m,F] x [F,d]).
  ps.clear();
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    ps.push_back({rows[g], d, F, plan.wide + r * F, F, experts[g].w2, d, plan.narrow + r * d, d});
  }
  SAL_CUDA_TRY(run_products(ctx, mode, false, false, ps, plan.ptrs, "expert a W2"));

  // out = narrow + b2.
  for (size_t first = 0; first < plan.active.size(); first += kChunk) {
    const auto t = table<const float*>(plan, rows, first, chunk_count(plan, first),
                                       [&](int g) { return experts[g].b2; });
    bias_out_kernel<<<row_grid(t, d), kThreads, 0, ctx.stream()>>>(t, plan.narrow, out, d);
    SAL_CUDA_TRY(launch_status("bias_out_kernel"));
  }
  return {};
}

Status expert_mlp_backward(const Context& ctx, GroupedGemmMode mode, int G, const int* rows, int d,
                           const ExpertParams* experts, const ExpertSaved& saved, const float* dout, float* dx,
                           const ExpertGrads* grads, void* scratch, size_t scratch_bytes) {
  Plan plan;
  SAL_CUDA_TRY(make_plan("expert_mlp_backward", mode, G, rows, d, experts, saved, scratch, scratch_bytes, &plan));
  if (plan.R == 0) return {};
  if (!dout || !dx) return invalid_argument(std::string("expert_mlp_backward: null ") + (dout ? "dx" : "dout"));
  if (!grads) return invalid_argument("expert_mlp_backward: null grads");
  for (int g : plan.active) {
    const ExpertGrads& e = grads[g];
    if (!e.w1 || !e.b1 || !e.w2 || !e.b2)
      return invalid_argument("expert_mlp_backward: expert " + std::to_string(g) + " has a null gradient");
  }
  const int F = 4 * d;
  const size_t R = size_t(plan.R);

  // wide = gelu(h) (recomputed rather than kept), narrow = bf16(dout).
  if (mode == GroupedGemmMode::fused)
    gelu_bf16_kernel<<<grid_for(ctx, R * F), kThreads, 0, ctx.stream()>>>(fused_h(saved), plan.wide, R * F);
  else
    gelu_bf16_kernel<<<grid_for(ctx, R * F), kThreads, 0, ctx.stream()>>>(saved.h, plan.wide, R * F);
  SAL_CUDA_TRY(launch_status("gelu_bf16_kernel"));
  round_bf16_kernel<<<grid_for(ctx, R * d), kThreads, 0, ctx.stream()>>>(dout, plan.narrow, R * d);
  SAL_CUDA_TRY(launch_status("round_bf16_kernel"));

  // dW2 += gelu(h)^T dout, db2 += colsum(dout) (from the fp32 dout).
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    SAL_CUDA_TRY(gemm_ld(ctx, true, false, F, d, rows[g], 1.0f, plan.wide + r * F, F, plan.narrow + r * d, d, 1.0f,
                         grads[g].w2, d));
  }
  SAL_CUDA_TRY(column_sums(ctx, plan, rows, dout, d, [&](int g) { return grads[g].b2; }));
  if (mode == GroupedGemmMode::fused) return fused_backward(ctx, plan, rows, d, experts, saved, dx, grads);

  // wide = dout W2^T (per expert: [m,d] x [F,d]^T), then dh = that * gelu'(h) in place.
  std::vector<Product> ps;
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    ps.push_back({rows[g], F, d, plan.narrow + r * d, d, experts[g].w2, d, plan.wide + r * F, F});
  }
  SAL_CUDA_TRY(run_products(ctx, mode, false, true, ps, plan.ptrs, "expert dout W2^T"));
  gelu_grad_kernel<<<grid_for(ctx, R * F), kThreads, 0, ctx.stream()>>>(saved.h, plan.wide, R * F);
  SAL_CUDA_TRY(launch_status("gelu_grad_kernel"));

  SAL_CUDA_TRY(up_grads(ctx, plan, rows, d, saved, grads));

  // narrow = dh W1^T (per expert: [m,F] x [d,F]^T), dx = float(narrow).
  ps.clear();
  for (int g : plan.active) {
    const size_t r = size_t(plan.begin[g]);
    ps.push_back({rows[g], d, F, plan.wide + r * F, F, experts[g].w1, F, plan.narrow + r * d, d});
  }
  SAL_CUDA_TRY(run_products(ctx, mode, false, true, ps, plan.ptrs, "expert dh W1^T"));
  widen_kernel<<<grid_for(ctx, R * d), kThreads, 0, ctx.stream()>>>(plan.narrow, dx, R * d);
  return launch_status("widen_kernel");
}

}  // namespace sal::kernels::cuda

// ---- the fused-mode probe ------------------------------------------------------------------------

namespace sal::kernels::cuda {
namespace {

constexpr int kProbeD = 16, kProbeF = 4 * kProbeD;
constexpr int kProbeRows[] = {24, 8};
constexpr int kProbeG = 2, kProbeR = 32;

std::vector<float> pseudo_random(size_t n, uint32_t seed, float scale) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (float(s >> 8) / float(1u << 24) - 0.5f);
  }
  return v;
}

std::vector<Bf16> bf16_of(const std::vector<float>& v) {
  std::vector<Bf16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = __float2bfloat16_rn(v[i]);
  return r;
}

// ||a - b|| / ||b||.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += double(a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The probe's inputs (both experts' weights in one buffer each) and one mode's results.
struct Probe {
  Buffer<Bf16> w1, w2;
  Buffer<float> b1, b2, x, dout;
  std::vector<ExpertParams> params;

  Status create() {
    const size_t D = kProbeD, F = kProbeF, G = kProbeG, R = kProbeR;
    SAL_CUDA_TRY(w1.upload(bf16_of(pseudo_random(G * D * F, 1, 0.5f))));
    SAL_CUDA_TRY(w2.upload(bf16_of(pseudo_random(G * F * D, 2, 0.25f))));
    SAL_CUDA_TRY(b1.upload(pseudo_random(G * F, 3, 0.5f)));
    SAL_CUDA_TRY(b2.upload(pseudo_random(G * D, 4, 0.5f)));
    SAL_CUDA_TRY(x.upload(pseudo_random(R * D, 5, 2.0f)));
    SAL_CUDA_TRY(dout.upload(pseudo_random(R * D, 6, 2.0f)));
    for (size_t g = 0; g < G; ++g)
      params.push_back({w1.get() + g * D * F, b1.get() + g * F, w2.get() + g * F * D, b2.get() + g * D});
    return {};
  }

  // Forward + backward in `mode`; *result = out, dx, then every gradient, concatenated.
  Status run(const Context& ctx, GroupedGemmMode mode, std::vector<float>* result) const {
    const size_t D = kProbeD, F = kProbeF, G = kProbeG, R = kProbeR;
    Buffer<float> out, dx, h, grads;
    Buffer<Bf16> sx;
    Buffer<unsigned char> scratch;
    SAL_CUDA_TRY(out.allocate(R * D));
    SAL_CUDA_TRY(dx.allocate(R * D));
    SAL_CUDA_TRY(h.allocate(R * F));
    SAL_CUDA_TRY(sx.allocate(R * D));
    SAL_CUDA_TRY(scratch.allocate(expert_mlp_scratch_bytes(kProbeR, kProbeD)));
    const size_t per = D * F + F + F * D + D;  // one expert's gradients: w1, b1, w2, b2
    SAL_CUDA_TRY(grads.upload(std::vector<float>(G * per, 0.0f)));
    std::vector<ExpertGrads> gs;
    for (size_t g = 0; g < G; ++g) {
      float* base = grads.get() + g * per;
      gs.push_back({base, base + D * F, base + D * F + F, base + D * F + F + F * D});
    }
    const ExpertSaved saved{sx.get(), h.get()};
    SAL_CUDA_TRY(expert_mlp_forward(ctx, mode, kProbeG, kProbeRows, kProbeD, params.data(), x.get(), out.get(), saved,
                                    scratch.get(), scratch.size()));
    SAL_CUDA_TRY(expert_mlp_backward(ctx, mode, kProbeG, kProbeRows, kProbeD, params.data(), saved, dout.get(),
                                     dx.get(), gs.data(), scratch.get(), scratch.size()));
    SAL_CUDA_TRY(ctx.synchronize());
    std::vector<float> a, b, c;
    SAL_CUDA_TRY(out.download(&a));
    SAL_CUDA_TRY(dx.download(&b));
    SAL_CUDA_TRY(grads.download(&c));
    result->clear();
    for (const auto* v : {&a, &b, &c}) result->insert(result->end(), v->begin(), v->end());
    return {};
  }
};

}  // namespace

Status check_fused_mode(const Context& ctx) {
  Probe probe;
  SAL_CUDA_TRY(probe.create());
  std::vector<float> fused, reference;
  SAL_CUDA_TRY(probe.run(ctx, GroupedGemmMode::fused, &fused));
  SAL_CUDA_TRY(probe.run(ctx, GroupedGemmMode::per_group, &reference));
  const double diff = rel_diff(fused, reference);
  if (!(diff < 2e-2))
    return invalid_argument("check_fused_mode: fused and per_group modes disagree (relative difference " +
                            std::to_string(diff) + ")");
  return {};
}

}  // namespace sal::kernels::cuda
