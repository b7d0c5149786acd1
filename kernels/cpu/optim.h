// optim.h — the optimizer's vector kernels: AdamW, and the sum of squares and scaling that
// global-norm clipping needs. Each is split over threads in fixed chunks of kOptimChunk elements.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sal::kernels::cpu {

// Elements per chunk: 16K floats (64 KiB) amortise a pool hand-off and fit in L2 with m, v, g.
constexpr size_t kOptimChunk = 16384;

// One AdamW step (decoupled weight decay, Loshchilov & Hutter), t >= 1 the 1-based step:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^t);  vhat = v / (1-b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p)
void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2,
           float eps, float weight_decay, int64_t t);

// sum x[i]^2 in double: per-chunk sums in a fixed lane order, chunks added in order.
double sum_squares(const float* x, size_t n);

// x *= s
void scale(float* x, size_t n, float s);

}  // namespace sal::kernels::cpu
