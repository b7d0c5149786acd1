// loss.cpp — see loss.h. Rows are split over threads in fixed chunks; each chunk's loss is a double
// sum over its rows in order and the chunks are added in order, so the loss is the same bits for any
// thread count.
#include "kernels/cpu/loss.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/check.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/softmax_row.h"

namespace sal::kernels::cpu {
namespace {

// Rows per chunk of the loss sum: a fixed number (not derived from the thread count).
constexpr size_t kLossRowChunk = 32;

SAL_KERNEL_CLONES
double loss_rows(const float* logits, const int32_t* targets, float* probs, size_t m0, size_t m1, int V) {
  double loss = 0.0;
  for (size_t m = m0; m < m1; ++m) {
    float mx = 0.0f;
    const float* x = logits + m * V;
    const float sum = softmax_row(x, probs + m * V, V, &mx);
    const int32_t t = targets[m];
    if (t < 0) continue;
    SAL_KCHECK(t < V, "target outside the vocabulary");
    loss += double(mx) + std::log(double(sum)) - double(x[t]);
  }
  return loss;
}

SAL_KERNEL_CLONES
void grad_rows(const float* probs, const int32_t* targets, float* dlogits, size_t m0, size_t m1, int V,
               float scale) {
  for (size_t m = m0; m < m1; ++m) {
    const float* p = probs + m * V;
    float* d = dlogits + m * V;
    const int32_t t = targets[m];
    if (t < 0) {
      std::fill(d, d + V, 0.0f);
      continue;
    }
    for (int i = 0; i < V; ++i) d[i] = scale * p[i];
    d[t] = scale * (p[t] - 1.0f);
  }
}

}  // namespace

double cross_entropy_forward(const float* logits, const int32_t* targets, float* probs, int M, int V) {
  if (M <= 0 || V <= 0) return 0.0;
  return detail::parallel_sum(size_t(M), kLossRowChunk, [&](size_t m0, size_t m1) {
    return loss_rows(logits, targets, probs, m0, m1, V);
  });
}

void cross_entropy_backward(const float* probs, const int32_t* targets, float* dlogits, int M, int V,
                            float scale) {
  if (M <= 0 || V <= 0) return;
  detail::parallel_for(size_t(M), detail::row_grain(V), [&](size_t m0, size_t m1) {
    grad_rows(probs, targets, dlogits, m0, m1, V, scale);
  });
}

}  // namespace sal::kernels::cpu
