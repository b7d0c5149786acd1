// gemm.h — dense matrix products (OpenBLAS cblas_sgemm, row-major) and the bias of a linear layer.
// A linear layer y = x W + b, x [M,K], W [K,N], runs as gemm + add_bias; its backward is
//   dW += x^T dy : gemm(true,  false, K, N, M, 1, x,  dy, 1, dW)
//   dx  = dy W^T : gemm(false, true,  M, K, N, 1, dy, W,  0, dx)
//   db += colsum(dy): bias_grad(dy, db, M, N)
// Large products are cut into tiles of C spread over the kernel threads (parallel.h), each tile a
// single-threaded OpenBLAS call: the result bits do not depend on the thread count.
// Conventions of every kernels/cpu header: row-major contiguous float32; outputs overwritten unless
// the comment says "accumulates" (+=).
#pragma once

namespace sal::kernels::cpu {

// C[M,N] = alpha * op(A) * op(B) + beta * C. A is [M,K] ([K,M] if transA), B is [K,N] ([N,K] if
// transB). beta == 0 overwrites C without reading it (NaNs there do not leak). Any of M, N, K may
// be 0 (an expert that received no tokens): K == 0 leaves beta * C.
void gemm(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, const float* B,
          float beta, float* C);

// gemm with explicit leading dimensions (row strides, in floats) for A, B and C: operates on blocks
// inside larger matrices, e.g. one head's columns of the packed [q | k | v] activations.
void gemm_ld(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc);

// y[m,n] += b[n]
void add_bias(float* y, const float* b, int M, int N);

// db[n] += sum_m dy[m,n]  (accumulates; the column sum is formed first, then added)
void bias_grad(const float* dy, float* db, int M, int N);

}  // namespace sal::kernels::cpu
