// vecmath.h — inline building blocks for the CPU kernels' loops, written so GCC auto-vectorises them:
// an exp without libm calls (so loops over it vectorise), the logistic function, and row reductions
// over a fixed number of lanes (a fixed summation order, so results do not depend on the vector
// width the compiler picked). Internal to kernels/cpu; not part of the ops.h interface.
#pragma once

#include <bit>
#include <cstdint>

// Compile a function three times — AVX-512, AVX2+FMA, baseline x86-64 — and pick one at load time
// (GCC/Clang ifunc). Applied to the functions that hold hot loops; their inline callees follow.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define SAL_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SAL_KERNEL_CLONES
#endif

// Forced inlining for the helpers below: a plain `inline` helper may be kept out of line, compiled
// for baseline x86-64 only, and then the clones' loops around it cannot vectorise.
#if defined(__GNUC__) || defined(__clang__)
#define SAL_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define SAL_KERNEL_INLINE inline
#endif

namespace sal::kernels::cpu::vm {

// exp(x), relative error ~2e-7 (a float ulp or two), for x in [kExpMin, kExpMax]; inputs outside
// are clamped there (exp(-87) ~ 1.6e-38 is the smallest normal float's neighbourhood; exp(88) ~
// 1.7e38 is below FLT_MAX), NaN stays NaN. Cody–Waite reduction x = n ln2 + r, |r| <= ln2/2, then
// a degree-7 Taylor polynomial for e^r and 2^n built in the exponent bits.
constexpr float kExpMin = -87.0f;
constexpr float kExpMax = 88.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;         // ln 2, upper bits: n * kLn2Hi is exact
constexpr float kLn2Lo = 1.42860682030941723212e-6f; // ln 2 - kLn2Hi
constexpr float kRoundMagic = 12582912.0f;           // 1.5 * 2^23: (v + M) - M rounds v to an integer

SAL_KERNEL_INLINE float exp(float x) {
  x = x > kExpMax ? kExpMax : x;
  x = x < kExpMin ? kExpMin : x;
  const float n = (x * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_n = std::bit_cast<float>((int32_t(n) + 127) << 23);
  return p * two_n;
}

// 1 / (1 + e^-z), no overflow for any finite z.
SAL_KERNEL_INLINE float sigmoid(float z) { return 1.0f / (1.0f + exp(-z)); }

// Lanes of the row reductions: 16 floats, one AVX-512 register or two AVX2 ones.
constexpr int kLanes = 16;

// Folds the lanes pairwise (fixed order).
SAL_KERNEL_INLINE float fold(float* acc) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

// sum_{i<n} term(i): term(i) goes to lane i % kLanes, lanes are folded pairwise at the end.
template <class Term>
SAL_KERNEL_INLINE float lane_sum(int n, Term term) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += term(i + j);
  for (int j = 0; i + j < n; ++j) acc[j] += term(i + j);
  return fold(acc);
}

// max_{i<n} x[i] (n >= 1); NaNs are skipped here (they reach the result through the exp anyway).
SAL_KERNEL_INLINE float lane_max(const float* x, int n) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = x[0];
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (int j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] = acc[j + w] > acc[j] ? acc[j + w] : acc[j];
  return acc[0];
}

}  // namespace sal::kernels::cpu::vm
