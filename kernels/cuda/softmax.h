// softmax.h — the MoE gate's pieces on the GPU, the same operators as kernels/cpu/softmax.h on device
// pointers: row softmax with its backward, and top-k selection per row.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// Largest k topk accepts (a gate's k is 1 or 2; 8 covers fine-grained MoE with room to spare).
constexpr int kTopKMax = 16;

// y[m,:] = softmax(x[m,:]) over N columns (max-subtracted; y may alias x). x, y [M,N].
Status softmax_forward(const Context& ctx, const float* x, float* y, int M, int N);

// dx = y * (dy - sum_n y dy), row by row (overwrites; dx may alias dy).
Status softmax_backward(const Context& ctx, const float* y, const float* dy, float* dx, int M, int N);

// The k largest entries of each row of x [M,N], largest first; equal values by lower index; NaNs
// after every number (among themselves by lower index), as the CPU's topk. idx [M,k] int32,
// val [M,k]. Needs 1 <= k <= min(N, kTopKMax), else invalid_argument. Any N works (one warp per
// row; it is meant for gate widths, up to a few hundred experts).
Status topk(const Context& ctx, const float* x, int M, int N, int k, int32_t* idx, float* val);

}  // namespace sal::kernels::cuda
