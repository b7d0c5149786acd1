// optim.h — the optimizer's vector kernels on the GPU, the same operators as kernels/cpu/optim.h on
// device pointers: AdamW, and the sum of squares and scaling that global-norm clipping needs, plus
// clip_scale, which applies engine/model/optimizer.cpp's clipping factor on the device so the
// step needs no host round trip.
//
// Global-norm clipping on the GPU: sum_squares the first gradient tensor, add_sum_squares every
// other one into the same device double (all on ctx.stream(): stream order is the only
// synchronisation needed), then clip_scale each tensor with that double. Sums are deterministic:
// fixed partial sums per block (their number depends only on n) added in a fixed order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// Most partial sums (blocks) sum_squares uses; its scratch never exceeds this many doubles.
constexpr size_t kSumSquaresMaxBlocks = 1024;

// One AdamW step, t >= 1 the 1-based step (else invalid_argument), as kernels/cpu/optim.h:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^t);  vhat = v / (1-b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p)
// The bias corrections are formed on the host in double, as the CPU forms them.
Status adamw(const Context& ctx, float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, int64_t t);

// Doubles of scratch sum_squares / add_sum_squares need for n elements (<= kSumSquaresMaxBlocks).
size_t sum_squares_scratch_doubles(size_t n);

// *out = sum x[i]^2, in double (out: one device double, overwritten; 0 when n == 0). scratch:
// sum_squares_scratch_doubles(n) doubles of device memory, used only in this call's stream order.
Status sum_squares(const Context& ctx, const float* x, size_t n, double* out, double* scratch);

// *out += sum x[i]^2 (accumulates; nothing when n == 0): the other tensors of a global norm.
Status add_sum_squares(const Context& ctx, const float* x, size_t n, double* out, double* scratch);

// x *= s
Status scale(const Context& ctx, float* x, size_t n, float s);

// Global-norm clipping, engine/model/optimizer.cpp's clip_scale applied on the device: with
// norm = sqrt(*sum_squares) (a device double, e.g. from sum_squares), x *= float(max_norm / norm)
// unless max_norm <= 0, norm <= max_norm or norm is not finite (then x is left untouched).
Status clip_scale(const Context& ctx, float* x, size_t n, const double* sum_squares, double max_norm);

}  // namespace sal::kernels::cuda
