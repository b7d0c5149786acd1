// softmax.cpp — see softmax.h. Rows are independent and split over threads; within a row the max
// and the sum use vm's fixed-lane reductions, the exponentials vm::exp.
#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/check.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

SAL_KERNEL_CLONES
void softmax_rows(const float* x, float* y, size_t m0, size_t m1, int N) {
  for (size_t m = m0; m < m1; ++m) softmax_row(x + m * N, y + m * N, N);
}

SAL_KERNEL_CLONES
void softmax_backward_rows(const float* y, const float* dy, float* dx, size_t m0, size_t m1, int N) {
  for (size_t m = m0; m < m1; ++m) {
    const float* yr = y + m * N;
    const float* dyr = dy + m * N;
    float* dxr = dx + m * N;
    const float dot = vm::lane_sum(N, [&](int i) { return yr[i] * dyr[i]; });
    for (int i = 0; i < N; ++i) dxr[i] = yr[i] * (dyr[i] - dot);
  }
}

// a before b in top-k order: larger value, or equal value and lower index; numbers before NaNs.
bool ranks_before(float a, int ia, float b, int ib) {
  if (a > b) return true;
  if (a == b) return ia < ib;
  return b != b && a == a;  // b is NaN, a is not
}

// Keeps the best k of one row in idx/val, sorted, by insertion: O(N k), k is small (a gate's top-k).
void topk_row(const float* x, int N, int k, int32_t* idx, float* val) {
  int filled = 0;
  for (int i = 0; i < N; ++i) {
    if (filled == k && !ranks_before(x[i], i, val[k - 1], idx[k - 1])) continue;
    int pos = filled < k ? filled++ : k - 1;
    for (; pos > 0 && ranks_before(x[i], i, val[pos - 1], idx[pos - 1]); --pos) {
      val[pos] = val[pos - 1];
      idx[pos] = idx[pos - 1];
    }
    val[pos] = x[i];
    idx[pos] = i;
  }
}

}  // namespace

void softmax_forward(const float* x, float* y, int M, int N) {
  if (N <= 0) return;
  detail::parallel_for(size_t(std::max(0, M)), detail::row_grain(N),
                       [&](size_t m0, size_t m1) { softmax_rows(x, y, m0, m1, N); });
}

void softmax_backward(const float* y, const float* dy, float* dx, int M, int N) {
  if (N <= 0) return;
  detail::parallel_for(size_t(std::max(0, M)), detail::row_grain(N),
                       [&](size_t m0, size_t m1) { softmax_backward_rows(y, dy, dx, m0, m1, N); });
}

void topk(const float* x, int M, int N, int k, int32_t* idx, float* val) {
  SAL_KCHECK(k >= 1 && k <= N, "topk needs 1 <= k <= N");
  detail::parallel_for(size_t(std::max(0, M)), detail::row_grain(N * k), [&](size_t m0, size_t m1) {
    for (size_t m = m0; m < m1; ++m) topk_row(x + m * N, N, k, idx + m * k, val + m * k);
  });
}

}  // namespace sal::kernels::cpu
