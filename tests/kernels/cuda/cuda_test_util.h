// cuda_test_util.h — what the GPU kernel tests share: one Context for the process, random host
// data, uploads that fail the test loudly, outputs poisoned with NaN before a kernel writes them
// (so an element a kernel forgot to write fails the comparison), host values rounded as bf16
// operands, and error measures against the CPU reference (kernels/cpu): relative 2-norm error, the
// worst element, and the worst difference scaled by the largest reference value.
#pragma once

#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/buffer.h"
#include "kernels/cuda/context.h"

namespace sal::test::gpu {

namespace kc = sal::kernels::cuda;

// The process's Context on device 0 (created on first use; the test fails if it cannot be).
inline kc::Context& ctx() {
  static std::unique_ptr<kc::Context> c;
  if (!c) {
    kc::Status s = kc::Context::create(0, &c);
    REQUIRE_MESSAGE(s.ok(), s.what());
  }
  return *c;
}

#define SAL_CHECK_OK(expr)                      \
  do {                                          \
    ::sal::kernels::cuda::Status s_ = (expr);   \
    REQUIRE_MESSAGE(s_.ok(), s_.what());        \
  } while (0)

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

template <class T>
kc::Buffer<T> to_device(const std::vector<T>& host) {
  kc::Buffer<T> b;
  SAL_CHECK_OK(b.upload(host));
  return b;
}

// n elements, every byte 0xFF (NaN for floats, -1 for ints).
template <class T>
kc::Buffer<T> poisoned(size_t n) {
  kc::Buffer<T> b;
  SAL_CHECK_OK(b.allocate(n));
  SAL_CHECK_OK(b.fill_bytes(0xFF));
  return b;
}

// Waits for the stream, then copies the buffer out.
template <class T>
std::vector<T> to_host(const kc::Buffer<T>& b) {
  SAL_CHECK_OK(ctx().synchronize());
  std::vector<T> h;
  SAL_CHECK_OK(b.download(&h));
  return h;
}

// v rounded to bf16 and back: the values a kernel sees when v is its bf16 operand.
inline std::vector<float> round_bf16(std::vector<float> v) {
  for (auto& x : v) x = __bfloat162float(__float2bfloat16_rn(x));
  return v;
}

// ||got - ref|| / ||ref|| in double; infinite when any got is NaN or the sizes differ.
inline double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    double d = double(got[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// max |got - ref| / (|ref| + floor): catches one bad element that the 2-norm would hide.
inline double worst_error(const std::vector<float>& got, const std::vector<float>& ref, double floor = 1e-3) {
  if (got.size() != ref.size()) return INFINITY;
  double w = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    w = std::fmax(w, std::fabs(double(got[i]) - ref[i]) / (std::fabs(double(ref[i])) + floor));
  }
  return w;
}

// max |got - ref| / max |ref|: one wrong element shows even where the 2-norm would hide it;
// infinite for a NaN or a size mismatch.
inline double max_scaled(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num = std::fmax(num, std::fabs(double(got[i]) - ref[i]));
    den = std::fmax(den, std::fabs(double(ref[i])));
  }
  return den == 0 ? num : num / den;
}

// Tolerances: fp32 kernels (reassociation only) and kernels with bf16 GEMM operands.
constexpr double kFp32Tol = 1e-5;
constexpr double kBf16Tol = 1e-2;
// No element of an fp32 kernel's result may be off by more than this, relative to |ref| + 1e-3.
constexpr double kWorstTol = 1e-3;

// got matches ref to fp32 accuracy: 2-norm and worst element.
inline void check_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what,
                        double tol = kFp32Tol, double worst_tol = kWorstTol) {
  const double r = rel_error(got, ref), w = worst_error(got, ref);
  CHECK_MESSAGE(r <= tol, what << ": relative error " << r);
  CHECK_MESSAGE(w <= worst_tol, what << ": worst element error " << w);
}

// The largest |v[i]| (NaN counts as infinite).
inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::isnan(x) ? INFINITY : std::fmax(m, std::fabs(double(x)));
  return m;
}

// Same bits (NaNs included).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace sal::test::gpu
