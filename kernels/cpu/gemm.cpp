// gemm.cpp — see gemm.h. OpenBLAS always runs single-threaded here (parallel.cpp pins it); a large
// product is cut into tiles of C, each one single-threaded cblas_sgemm call, spread over our pool.
// The tiling depends on the shape only, never on the thread count, so every element of C is computed
// by the same call on the same data whatever set_threads said: bit-identical results. (OpenBLAS's
// own threading does not give that: its 1- and 2-thread results differ in the last bits.)
// Sizes are checked and empty products handled here rather than handed to OpenBLAS, whose argument
// checks reject a leading dimension of 0.
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/check.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

// Tiles of C: kGemmTileRows rows; when that leaves fewer than kGemmMinTiles tiles (few tokens, or
// a weight gradient whose M is the model width), columns are cut in kGemmTileCols too. Each tile
// repacks its panels of A and B, so tiles are kept large (a 256-row tile of a d=256 expert GEMM is
// ~130 MFLOP); below kGemmSerialFlops a product is one call.
constexpr int kGemmTileRows = 256;
constexpr int kGemmTileCols = 256;
constexpr int kGemmMinTiles = 4;
constexpr double kGemmSerialFlops = 8e6;

// C[M,N] = beta * C, for an empty inner dimension (beta == 0 writes zeros without reading C).
void scale_c(int M, int N, float beta, float* C, int ldc) {
  for (int m = 0; m < M; ++m) {
    float* c = C + size_t(m) * ldc;
    for (int n = 0; n < N; ++n) c[n] = beta == 0.0f ? 0.0f : beta * c[n];
  }
}

SAL_KERNEL_CLONES
void add_bias_rows(float* y, const float* b, size_t m0, size_t m1, int N) {
  for (size_t m = m0; m < m1; ++m) {
    float* row = y + m * N;
    for (int n = 0; n < N; ++n) row[n] += b[n];
  }
}

// db[n0:n1] += sum over all M rows of dy[:, n0:n1], the sum formed first, in row order.
SAL_KERNEL_CLONES
void column_sums(const float* dy, float* db, int M, int N, int n0, int n1) {
  float acc[kColumnBlock] = {};
  const int w = n1 - n0;
  for (int m = 0; m < M; ++m) {
    const float* row = dy + size_t(m) * N + n0;
    for (int j = 0; j < w; ++j) acc[j] += row[j];
  }
  for (int j = 0; j < w; ++j) db[n0 + j] += acc[j];
}

// One tile: rows [m0, m1) and columns [n0, n1) of C.
void gemm_tile(bool transA, bool transB, int m0, int m1, int n0, int n1, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  const float* At = transA ? A + m0 : A + size_t(m0) * lda;
  const float* Bt = transB ? B + size_t(n0) * ldb : B + n0;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m1 - m0,
              n1 - n0, K, alpha, At, lda, Bt, ldb, beta, C + size_t(m0) * ldc + n0, ldc);
}

}  // namespace

void gemm_ld(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) {
  SAL_KCHECK(M >= 0 && N >= 0 && K >= 0, "gemm sizes must be >= 0");
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  SAL_KCHECK(lda >= (transA ? M : K) && ldb >= (transB ? K : N) && ldc >= N, "gemm leading dimensions");
  if (2.0 * M * N * K < kGemmSerialFlops)
    return gemm_tile(transA, transB, 0, M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  const int row_tiles = (M + kGemmTileRows - 1) / kGemmTileRows;
  const int col_tiles = row_tiles >= kGemmMinTiles ? 1 : (N + kGemmTileCols - 1) / kGemmTileCols;
  const int tile_cols = col_tiles == 1 ? N : kGemmTileCols;
  detail::parallel_for(size_t(row_tiles) * col_tiles, 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const int m0 = int(t / col_tiles) * kGemmTileRows, n0 = int(t % col_tiles) * tile_cols;
      gemm_tile(transA, transB, m0, std::min(M, m0 + kGemmTileRows), n0, std::min(N, n0 + tile_cols), K, alpha,
                A, lda, B, ldb, beta, C, ldc);
    }
  });
}

void gemm(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, const float* B,
          float beta, float* C) {
  gemm_ld(transA, transB, M, N, K, alpha, A, transA ? M : K, B, transB ? K : N, beta, C, N);
}

void add_bias(float* y, const float* b, int M, int N) {
  detail::parallel_for(size_t(std::max(0, M)), detail::row_grain(N),
                       [&](size_t m0, size_t m1) { add_bias_rows(y, b, m0, m1, N); });
}

void bias_grad(const float* dy, float* db, int M, int N) {
  if (M <= 0 || N <= 0) return;
  const size_t blocks = size_t(N + kColumnBlock - 1) / kColumnBlock;
  detail::parallel_for(blocks, 1, [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b) {
      const int n0 = int(b) * kColumnBlock;
      column_sums(dy, db, M, N, n0, std::min(N, n0 + kColumnBlock));
    }
  });
}

}  // namespace sal::kernels::cpu
