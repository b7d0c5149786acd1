// gemm.cu — see gemm.h. cuBLAS is column-major; our matrices are row-major. A row-major matrix
// X [r,c] with row stride ld, read column-major with the same ld, is X^T [c,r]. So the row-major
// product C = op(A) op(B) is, column-major, C^T = op(B)^T op(A)^T: one cuBLAS call with the
// operands swapped —
//   cublas(transa = op(transB), transb = op(transA), m = N, n = M, k = K,
//          A' = B, lda' = ldb, B' = A, ldb' = lda, C, ldc)
// (B stored [K,N] read column-major is already op(B)^T [N,K], hence CUBLAS_OP_N when !transB; B
// stored [N,K] is B^T, so it needs CUBLAS_OP_T when transB. The same for A.) cuBLAS's leading
// dimension rules (lda' >= m' for OP_N, >= k' for OP_T, ...) then are exactly ours.
//
// Empty sizes never reach cuBLAS: M or N == 0 returns, K == 0 runs our own C = beta * C kernel
// (cuBLAS's handling of k == 0 is not something we want to depend on, and beta == 0 must write
// zeros without reading C). With beta == 0 cuBLAS does not read C (documented), so NaNs there do
// not leak.
#include "kernels/cuda/gemm.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/grid.cuh"

namespace sal::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// bias_grad: a block sums kColTile columns with kRowLanes threads per column, each lane taking
// every kRowLanes-th row; the lanes' partial sums are then added in lane order (fixed order).
constexpr int kColTile = 32;
constexpr int kRowLanes = 16;

cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

// Blocks for a grid-stride loop over n elements: enough to fill the device, no more.

__device__ inline float load(const float* p) { return *p; }
__device__ inline float load(const Bf16* p) { return __bfloat162float(*p); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(Bf16* p, float v) { *p = __float2bfloat16_rn(v); }

// C = beta * C on `batch` blocks of M x N (row stride ldc, block stride strideC); beta == 0
// writes zeros without reading C. The K == 0 product.
template <class T>
__global__ void scale_c_kernel(T* C, int M, int N, int ldc, long long strideC, int batch, float beta) {
  const size_t per = size_t(M) * N, total = per * size_t(batch);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const size_t b = i / per, r = i % per, m = r / N, n = r % N;
    T* c = C + b * strideC + m * ldc + n;
    store(c, beta == 0.0f ? 0.0f : beta * load(c));
  }
}

__global__ void add_bias_kernel(float* __restrict__ y, const float* __restrict__ b, int M, int N) {
  const size_t total = size_t(M) * N, stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += stride) y[i] += b[i % N];
}

// Block (kColTile, kRowLanes); block x covers columns [x * kColTile, +kColTile).
__global__ void bias_grad_kernel(const float* __restrict__ dy, float* __restrict__ db, int M, int N) {
  __shared__ float part[kRowLanes][kColTile];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  float acc = 0.0f;
  if (col < N) {
#pragma unroll 4
    for (int m = threadIdx.y; m < M; m += kRowLanes) acc += dy[size_t(m) * N + col];
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();  // every thread reaches this: no early return above
  if (threadIdx.y == 0 && col < N) {
    float s = 0.0f;
    for (int l = 0; l < kRowLanes; ++l) s += part[l][threadIdx.x];
    db[col] += s;
  }
}

// One product (or a strided batch of them) in row-major terms.
struct Problem {
  bool ta = false, tb = false;
  int M = 0, N = 0, K = 0;
  int lda = 0, ldb = 0, ldc = 0;
  long long sa = 0, sb = 0, sc = 0;
  int batch = 1;
};

std::string str(bool b) { return b ? "true" : "false"; }

Status check(const char* fn, const Problem& p, const void* A, const void* B, const void* C) {
  const std::string f(fn);
  if (p.M < 0 || p.N < 0 || p.K < 0 || p.batch < 0)
    return invalid_argument(f + ": sizes must be >= 0 (M " + std::to_string(p.M) + ", N " + std::to_string(p.N) +
                            ", K " + std::to_string(p.K) + ", batch " + std::to_string(p.batch) + ")");
  if (p.M == 0 || p.N == 0 || p.batch == 0) return {};
  if (!C) return invalid_argument(f + ": null C");
  if (p.ldc < p.N)
    return invalid_argument(f + ": ldc " + std::to_string(p.ldc) + " < N " + std::to_string(p.N));
  if (p.K == 0) return {};
  if (!A || !B) return invalid_argument(f + ": null " + (A ? "B" : "A"));
  const int need_a = p.ta ? p.M : p.K, need_b = p.tb ? p.K : p.N;
  if (p.lda < need_a)
    return invalid_argument(f + ": lda " + std::to_string(p.lda) + " < " + std::to_string(need_a) + " (transA " +
                            str(p.ta) + ")");
  if (p.ldb < need_b)
    return invalid_argument(f + ": ldb " + std::to_string(p.ldb) + " < " + std::to_string(need_b) + " (transB " +
                            str(p.tb) + ")");
  return {};
}

template <class T>
Status scale_c(const Context& ctx, T* C, const Problem& p, float beta) {
  const size_t n = size_t(p.M) * p.N * size_t(p.batch);
  scale_c_kernel<<<grid_for(ctx, n), kThreads, 0, ctx.stream()>>>(C, p.M, p.N, p.ldc, p.sc, p.batch, beta);
  return launch_status("scale_c_kernel");
}

// Validates, handles the empty cases, then one cuBLAS call (batched when `batched`).
template <class TC>
Status run(const Context& ctx, const char* fn, const Problem& p, float alpha, const void* A, const void* B,
           float beta, TC* C, cudaDataType_t ab_type, cudaDataType_t c_type, cublasComputeType_t compute,
           bool batched) {
  SAL_CUDA_TRY(check(fn, p, A, B, C));
  if (p.M == 0 || p.N == 0 || p.batch == 0) return {};
  if (p.K == 0) return scale_c(ctx, C, p, beta);
  const float a = alpha, b = beta;  // host scalars (CUBLAS_POINTER_MODE_HOST)
  if (!batched) {
    const cublasStatus_t st = cublasGemmEx(ctx.blas(), op(p.tb), op(p.ta), p.N, p.M, p.K, &a, B, ab_type, p.ldb, A,
                                           ab_type, p.lda, &b, C, c_type, p.ldc, compute, CUBLAS_GEMM_DEFAULT);
    return cublas_status(int(st), (std::string("cublasGemmEx (") + fn + ")").c_str());
  }
  const cublasStatus_t st =
      cublasGemmStridedBatchedEx(ctx.blas(), op(p.tb), op(p.ta), p.N, p.M, p.K, &a, B, ab_type, p.ldb, p.sb, A,
                                 ab_type, p.lda, p.sa, &b, C, c_type, p.ldc, p.sc, p.batch, compute,
                                 CUBLAS_GEMM_DEFAULT);
  return cublas_status(int(st), (std::string("cublasGemmStridedBatchedEx (") + fn + ")").c_str());
}

Problem problem(bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldc) {
  Problem p;
  p.ta = ta, p.tb = tb, p.M = M, p.N = N, p.K = K, p.lda = lda, p.ldb = ldb, p.ldc = ldc;
  return p;
}

}  // namespace

Status gemm_ld(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const Bf16* A,
               int lda, const Bf16* B, int ldb, float beta, float* C, int ldc) {
  return run(ctx, "gemm", problem(transA, transB, M, N, K, lda, ldb, ldc), alpha, A, B, beta, C, CUDA_R_16BF,
             CUDA_R_32F, CUBLAS_COMPUTE_32F, false);
}

Status gemm(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const Bf16* A,
            const Bf16* B, float beta, float* C) {
  return gemm_ld(ctx, transA, transB, M, N, K, alpha, A, transA ? M : K, B, transB ? K : N, beta, C, N);
}

Status gemm_bf16(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const Bf16* A,
                 int lda, const Bf16* B, int ldb, float beta, Bf16* C, int ldc) {
  return run(ctx, "gemm_bf16", problem(transA, transB, M, N, K, lda, ldb, ldc), alpha, A, B, beta, C, CUDA_R_16BF,
             CUDA_R_16BF, CUBLAS_COMPUTE_32F, false);
}

Status gemm_f32_ld(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha,
                   const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  // PEDANTIC: full fp32 in every stage, even if someone sets TF32 math mode on the shared handle.
  return run(ctx, "gemm_f32", problem(transA, transB, M, N, K, lda, ldb, ldc), alpha, A, B, beta, C, CUDA_R_32F,
             CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, false);
}

Status gemm_f32(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const float* A,
                const float* B, float beta, float* C) {
  return gemm_f32_ld(ctx, transA, transB, M, N, K, alpha, A, transA ? M : K, B, transB ? K : N, beta, C, N);
}

Status gemm_strided_batched(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha,
                            const Bf16* A, int lda, long long strideA, const Bf16* B, int ldb, long long strideB,
                            float beta, float* C, int ldc, long long strideC, int batch) {
  Problem p = problem(transA, transB, M, N, K, lda, ldb, ldc);
  p.sa = strideA, p.sb = strideB, p.sc = strideC, p.batch = batch;
  return run(ctx, "gemm_strided_batched", p, alpha, A, B, beta, C, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F,
             true);
}

Status add_bias(const Context& ctx, float* y, const float* b, int M, int N) {
  if (M < 0 || N < 0)
    return invalid_argument("add_bias: sizes must be >= 0 (M " + std::to_string(M) + ", N " + std::to_string(N) + ")");
  if (M == 0 || N == 0) return {};
  if (!y || !b) return invalid_argument(std::string("add_bias: null ") + (y ? "b" : "y"));
  add_bias_kernel<<<grid_for(ctx, size_t(M) * N), kThreads, 0, ctx.stream()>>>(y, b, M, N);
  return launch_status("add_bias_kernel");
}

Status bias_grad(const Context& ctx, const float* dy, float* db, int M, int N) {
  if (M < 0 || N < 0)
    return invalid_argument("bias_grad: sizes must be >= 0 (M " + std::to_string(M) + ", N " + std::to_string(N) +
                            ")");
  if (M == 0 || N == 0) return {};
  if (!dy || !db) return invalid_argument(std::string("bias_grad: null ") + (dy ? "db" : "dy"));
  const unsigned blocks = unsigned((N + kColTile - 1) / kColTile);
  bias_grad_kernel<<<blocks, dim3(kColTile, kRowLanes), 0, ctx.stream()>>>(dy, db, M, N);
  return launch_status("bias_grad_kernel");
}

}  // namespace sal::kernels::cuda
