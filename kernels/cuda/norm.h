// norm.h — LayerNorm over the last dimension on the GPU, the same operator as
// kernels/cpu/norm.h (eps = kLayerNormEps = 1e-5, biased variance, mean and rstd saved for the
// backward pass), and RMSNorm (moe-llama's), the operator of kernels/cpu/rmsnorm.h (no mean, no
// shift, the caller's eps), on device pointers.
//
// The backward pass's column sums (dgamma, dbeta; RMSNorm's dgamma) are deterministic without float atomics: rows are
// cut into at most kLayerNormMaxChunks fixed chunks, each chunk's column sums go to a caller-given
// scratch buffer, and a second kernel adds the chunks in chunk order. The cut depends only on M,
// so the result is the same bits on every run (not the CPU's bits: the summation order differs).
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

constexpr float kLayerNormEps = 1e-5f;  // as kernels/cpu/norm.h
// Upper bound on the row chunks of the backward column sums (bounds the scratch size).
constexpr int kLayerNormMaxChunks = 128;

// y = (x - mean) * rstd * gamma + beta, row by row; x, y [M,N] (y may alias x); gamma, beta [N];
// mean, rstd [M] (written).
Status layernorm_forward(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int M, int N);

// Floats of scratch layernorm_backward needs for M rows of N columns when dgamma or dbeta is
// given: 2 * chunks * N, chunks <= kLayerNormMaxChunks (so at most 2 * 128 * N floats).
size_t layernorm_backward_scratch_floats(int M, int N);

// dx overwritten (it must not alias dy or x); dgamma, dbeta [N] accumulate. dgamma and dbeta may
// both be null (a frozen operator): the column pass is skipped and scratch may be null. Otherwise
// scratch is device memory of layernorm_backward_scratch_floats(M, N) floats, used only inside
// this call's stream order (it can be shared with any other work on ctx.stream()).
Status layernorm_backward(const Context& ctx, const float* dy, const float* x, const float* gamma,
                          const float* mean, const float* rstd, float* dx, float* dgamma, float* dbeta, int M,
                          int N, float* scratch);

// RMSNorm: y = x * rstd * gamma, rstd[m] = 1 / sqrt(mean(x^2) + eps); x, y [M,N] (y may alias x);
// gamma [N]; rstd [M] (written).
Status rmsnorm_forward(const Context& ctx, const float* x, const float* gamma, float* y, float* rstd, int M, int N,
                       float eps);

// Floats of scratch rmsnorm_backward needs when dgamma is given: chunks * N (at most 128 * N).
size_t rmsnorm_backward_scratch_floats(int M, int N);

// dx overwritten (it must not alias dy or x); dgamma [N] accumulates, and may be null (a frozen
// operator, the QK-norm's gains of a frozen unit): then scratch may be null. Otherwise scratch is
// device memory of rmsnorm_backward_scratch_floats(M, N) floats, used as layernorm_backward's.
Status rmsnorm_backward(const Context& ctx, const float* dy, const float* x, const float* gamma, const float* rstd,
                        float* dx, float* dgamma, int M, int N, float* scratch);

}  // namespace sal::kernels::cuda
