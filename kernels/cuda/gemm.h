// gemm.h — dense matrix products on the GPU (cuBLAS) and the bias of a linear layer: the same
// operations and argument meanings as kernels/cpu/gemm.h, on device pointers.
//
// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major: A is [M,K] ([K,M] if transA), B is [K,N]
// ([N,K] if transB). beta == 0 overwrites C without reading it (NaNs there do not leak). Any of
// M, N, K may be 0: M or N == 0 does nothing, K == 0 leaves beta * C (zeros when beta == 0).
//
// Precision: `gemm`, `gemm_ld`, `gemm_bf16` and `gemm_strided_batched` take bf16 operands and
// accumulate in fp32 (tensor cores; CUBLAS_COMPUTE_32F). `gemm_f32` takes fp32 operands and never
// uses TF32 (CUBLAS_COMPUTE_32F_PEDANTIC): the exact path, for references and small products.
// alpha and beta are host scalars (the handle stays in CUBLAS_POINTER_MODE_HOST, its default).
//
// Linear layer y = x W + b with x [M,K], W [K,N] (as in kernels/cpu/gemm.h):
//   forward  gemm(false, false, M, N, K, 1, x, W, 0, y); add_bias(y, b, M, N)
//   dW      += x^T dy : gemm(true,  false, K, N, M, 1, x,  dy, 1, dW)
//   dx       = dy W^T : gemm(false, true,  M, K, N, 1, dy, W,  0, dx)
//   db      += colsum(dy): bias_grad(dy, db, M, N)
#pragma once

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// bf16 operands, fp32 C, fp32 accumulation.
Status gemm(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const Bf16* A,
            const Bf16* B, float beta, float* C);

// gemm with explicit leading dimensions (row strides, in elements) for A, B and C: blocks inside
// larger matrices. lda >= (transA ? M : K), ldb >= (transB ? K : N), ldc >= N.
Status gemm_ld(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const Bf16* A,
               int lda, const Bf16* B, int ldb, float beta, float* C, int ldc);

// gemm_ld with a bf16 C (beta * C read as bf16, the fp32 result rounded to nearest once): for a
// product whose output is the next product's operand (the expert MLP's hidden activations).
Status gemm_bf16(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const Bf16* A,
                 int lda, const Bf16* B, int ldb, float beta, Bf16* C, int ldc);

// fp32 operands, fp32 C, no TF32: the exact reference path.
Status gemm_f32(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha, const float* A,
                const float* B, float beta, float* C);
Status gemm_f32_ld(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha,
                   const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

// `batch` independent gemm_ld products; product i reads A + i*strideA, B + i*strideB and writes
// C + i*strideC (strides in elements). bf16 operands, fp32 C. The C blocks must not overlap.
Status gemm_strided_batched(const Context& ctx, bool transA, bool transB, int M, int N, int K, float alpha,
                            const Bf16* A, int lda, long long strideA, const Bf16* B, int ldb, long long strideB,
                            float beta, float* C, int ldc, long long strideC, int batch);

// y[m,n] += b[n]; y [M,N], b [N].
Status add_bias(const Context& ctx, float* y, const float* b, int M, int N);

// db[n] += sum_m dy[m,n]  (accumulates; the column sum is formed first in a fixed order, then
// added: deterministic, no atomics). dy [M,N], db [N].
Status bias_grad(const Context& ctx, const float* dy, float* db, int M, int N);

}  // namespace sal::kernels::cuda
