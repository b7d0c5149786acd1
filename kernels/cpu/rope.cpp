// rope.cpp — see rope.h. The angles are computed in double once per call (a [T, hd/2] table of cos
// and sin), so positions far down a long context keep their precision; rows are split over the pool.
#include "kernels/cpu/rope.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace sal::kernels::cpu {
namespace {

struct Angles {
  std::vector<float> cos, sin;  // [T, hd/2]
};

Angles angles(int T, int hd, float theta) {
  const int half = hd / 2;
  Angles a;
  a.cos.resize(size_t(T) * half);
  a.sin.resize(size_t(T) * half);
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(double(theta), -2.0 * i / double(hd));
    for (int t = 0; t < T; ++t) {
      a.cos[size_t(t) * half + i] = float(std::cos(t * freq));
      a.sin[size_t(t) * half + i] = float(std::sin(t * freq));
    }
  }
  return a;
}

// sign +1 rotates forward, -1 backward.
void rotate(float* x, int rows, int T, int ld, int col0, int heads, int hd, float theta, float sign) {
  if (rows <= 0 || hd < 2) return;
  const int half = hd / 2;
  const Angles a = angles(T, hd, theta);
  detail::parallel_for(size_t(rows), detail::row_grain(heads * hd), [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const float* c = &a.cos[(r % size_t(T)) * half];
      const float* s = &a.sin[(r % size_t(T)) * half];
      for (int h = 0; h < heads; ++h) {
        float* v = x + r * size_t(ld) + size_t(col0) + size_t(h) * hd;
        for (int i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half], sn = sign * s[i];
          v[i] = x1 * c[i] - x2 * sn;
          v[i + half] = x2 * c[i] + x1 * sn;
        }
      }
    }
  });
}

}  // namespace

void rope_forward(float* x, int rows, int T, int ld, int col0, int heads, int hd, float theta) {
  rotate(x, rows, T, ld, col0, heads, hd, theta, 1.0f);
}

void rope_backward(float* dx, int rows, int T, int ld, int col0, int heads, int hd, float theta) {
  rotate(dx, rows, T, ld, col0, heads, hd, theta, -1.0f);
}

}  // namespace sal::kernels::cpu
