// embedding.cpp — see embedding.h. Forward is split over rows. Backward scatters rows into the
// tables: split over column blocks instead, so every table element is summed by one thread over the
// rows in order (repeated ids in a batch would otherwise race or depend on the split).
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/check.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

SAL_KERNEL_CLONES
void forward_rows(const int32_t* ids, const float* tok, const float* pos, float* out, size_t r0, size_t r1,
                  int T, int C) {
  for (size_t r = r0; r < r1; ++r) {
    const float* te = tok + size_t(ids[r]) * C;
    const float* pe = pos + (r % size_t(T)) * C;
    float* o = out + r * C;
    for (int c = 0; c < C; ++c) o[c] = te[c] + pe[c];
  }
}

SAL_KERNEL_CLONES
void backward_columns(const int32_t* ids, const float* dout, float* dtok, float* dpos, int B, int T, int C,
                      int c0, int c1) {
  const int w = c1 - c0;
  for (size_t r = 0; r < size_t(B) * T; ++r) {
    const float* d = dout + r * C + c0;
    if (dtok) {
      float* t = dtok + size_t(ids[r]) * C + c0;
      for (int j = 0; j < w; ++j) t[j] += d[j];
    }
    if (dpos) {
      float* p = dpos + (r % size_t(T)) * C + c0;
      for (int j = 0; j < w; ++j) p[j] += d[j];
    }
  }
}

}  // namespace

void embedding_forward(const int32_t* ids, const float* tok, const float* pos, float* out, int B, int T, int C,
                       int V) {
  const size_t rows = size_t(std::max(0, B)) * std::max(0, T);
  for (size_t r = 0; r < rows; ++r) SAL_KCHECK(ids[r] >= 0 && ids[r] < V, "token id outside the vocabulary");
  embedding_forward(ids, tok, pos, out, B, T, C);
}

void embedding_forward(const int32_t* ids, const float* tok, const float* pos, float* out, int B, int T,
                       int C) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  detail::parallel_for(size_t(B) * T, detail::row_grain(C),
                       [&](size_t r0, size_t r1) { forward_rows(ids, tok, pos, out, r0, r1, T, C); });
}

void embedding_backward(const int32_t* ids, const float* dout, float* dtok, float* dpos, int B, int T, int C) {
  if (B <= 0 || T <= 0 || C <= 0 || (!dtok && !dpos)) return;
  const size_t blocks = size_t(C + kColumnBlock - 1) / kColumnBlock;
  detail::parallel_for(blocks, 1, [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b) {
      const int c0 = int(b) * kColumnBlock;
      backward_columns(ids, dout, dtok, dpos, B, T, C, c0, std::min(C, c0 + kColumnBlock));
    }
  });
}

}  // namespace sal::kernels::cpu
