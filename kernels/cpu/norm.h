// norm.h — LayerNorm over the last dimension (eps = kLayerNormEps), with the statistics saved for
// the backward pass: mean[m] and rstd[m] = 1 / sqrt(var + eps), var the biased (1/N) variance.
#pragma once

namespace sal::kernels::cpu {

constexpr float kLayerNormEps = 1e-5f;  // GPT-2's and PyTorch's default

// y = (x - mean) * rstd * gamma + beta, row by row; x, y [M,N]; gamma, beta [N]; mean, rstd [M].
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                       float* rstd, int M, int N);

// dx overwritten (it must not alias dy or x); dgamma, dbeta accumulate. dgamma and dbeta may both be null: a frozen operator
// (only the input gradient is wanted) then skips the column pass.
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, float* dx, float* dgamma, float* dbeta, int M, int N);

}  // namespace sal::kernels::cpu
