// rmsnorm.h — RMSNorm over the last dimension (moe-llama's norm): y = x * rstd * gamma with
// rstd[m] = 1 / sqrt(mean(x^2) + eps), saved for the backward pass (which needs no eps). No mean is
// subtracted and there is no shift.
#pragma once

namespace sal::kernels::cpu {

// x, y [M,N]; gamma [N]; rstd [M].
void rmsnorm_forward(const float* x, const float* gamma, float* y, float* rstd, int M, int N, float eps);

// dx overwritten (it must not alias dy or x); dgamma accumulates, and may be null (a frozen
// operator wants the input gradient only).
void rmsnorm_backward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx, float* dgamma,
                      int M, int N);

}  // namespace sal::kernels::cpu
