// softmax.h — the MoE gate's pieces: row softmax with its backward, and top-k selection per row.
#pragma once

#include <cstdint>

namespace sal::kernels::cpu {

// y[m,:] = softmax(x[m,:]) over N columns (max-subtracted; y may alias x).
void softmax_forward(const float* x, float* y, int M, int N);

// dx = y * (dy - sum_n y dy), row by row  (overwrites; dx may alias dy)
void softmax_backward(const float* y, const float* dy, float* dx, int M, int N);

// The k largest entries of each row of x [M,N], largest first; equal values by lower index.
// idx [M,k] int32, val [M,k]. 1 <= k <= N. NaNs are never preferred over numbers.
void topk(const float* x, int M, int N, int k, int32_t* idx, float* val);

}  // namespace sal::kernels::cpu
