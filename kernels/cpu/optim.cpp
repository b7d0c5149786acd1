// optim.cpp — see optim.h. All three are elementwise (sum_squares a reduction over fixed chunks),
// split over threads in kOptimChunk pieces; the bias corrections are formed once per call in double.
#include "kernels/cpu/optim.h"

#include <cmath>

#include "kernels/adamw_step.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

// Lanes of the double accumulation in sum_squares (fixed, so the order is fixed).
constexpr int kSumLanes = 8;

SAL_KERNEL_CLONES
void adamw_range(float* p, const float* g, float* m, float* v, size_t n, AdamStep s) {
  for (size_t i = 0; i < n; ++i) adamw_element(p[i], g[i], m[i], v[i], s);
}

SAL_KERNEL_CLONES
double sum_squares_range(const float* x, size_t n) {
  double acc[kSumLanes] = {};
  size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) acc[j] += double(x[i + j]) * double(x[i + j]);
  for (int j = 0; i + j < n; ++j) acc[j] += double(x[i + j]) * double(x[i + j]);
  for (int w = kSumLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

SAL_KERNEL_CLONES
void scale_range(float* x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace

void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1, float beta2,
           float eps, float weight_decay, int64_t t) {
  SAL_KCHECK(t >= 1, "adamw step t counts from 1");
  const AdamStep s = make_adam_step(lr, beta1, beta2, eps, weight_decay, t);
  detail::parallel_for(n, kOptimChunk,
                       [&](size_t b, size_t e) { adamw_range(p + b, g + b, m + b, v + b, e - b, s); });
}

double sum_squares(const float* x, size_t n) {
  return detail::parallel_sum(n, kOptimChunk, [&](size_t b, size_t e) { return sum_squares_range(x + b, e - b); });
}

void scale(float* x, size_t n, float s) {
  detail::parallel_for(n, kOptimChunk, [&](size_t b, size_t e) { scale_range(x + b, e - b, s); });
}

}  // namespace sal::kernels::cpu
