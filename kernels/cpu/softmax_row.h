// softmax_row.h — one row's softmax, shared by the gate softmax, the attention rows and the
// cross-entropy: y = exp(x - max) / sum. Internal to kernels/cpu. Inline, so it is compiled into
// each caller's SAL_KERNEL_CLONES variants.
#pragma once

#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {

// Writes y[0..n) (y may alias x); returns the sum of exp(x - max) and stores the max in *max_out
// when given (the cross-entropy needs both for its log-sum-exp).
SAL_KERNEL_INLINE float softmax_row(const float* x, float* y, int n, float* max_out = nullptr) {
  const float mx = vm::lane_max(x, n);
  for (int i = 0; i < n; ++i) y[i] = vm::exp(x[i] - mx);
  const float sum = vm::lane_sum(n, [&](int i) { return y[i]; });
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) y[i] *= inv;
  if (max_out) *max_out = mx;
  return sum;
}

}  // namespace sal::kernels::cpu
