// heads.cpp — see heads.h. Row by row; the sums of collapse_kv_heads run over the query heads in
// order from zero, so the GPU's kernel can give the same bits.
#include "kernels/cpu/heads.h"

#include <algorithm>
#include <cstddef>

namespace sal::kernels::cpu {

void expand_kv_heads(const float* qkv, float* full, int N, int D, int KV, int hd) {
  const int H = D / hd, group = D / KV, in = D + 2 * KV;
  for (int n = 0; n < N; ++n) {
    const float* src = qkv + size_t(n) * in;
    float* dst = full + size_t(n) * 3 * D;
    std::copy(src, src + D, dst);
    for (int h = 0; h < H; ++h) {
      const int kv = (h / group) * hd;
      std::copy(src + D + kv, src + D + kv + hd, dst + D + h * hd);
      std::copy(src + D + KV + kv, src + D + KV + kv + hd, dst + 2 * D + h * hd);
    }
  }
}

void collapse_kv_heads(const float* dfull, float* dqkv, int N, int D, int KV, int hd) {
  const int H = D / hd, group = D / KV, in = D + 2 * KV;
  for (int n = 0; n < N; ++n) {
    const float* src = dfull + size_t(n) * 3 * D;
    float* dst = dqkv + size_t(n) * in;
    std::copy(src, src + D, dst);
    std::fill(dst + D, dst + in, 0.0f);
    for (int h = 0; h < H; ++h) {
      const int kv = (h / group) * hd;
      for (int i = 0; i < hd; ++i) {
        dst[D + kv + i] += src[D + h * hd + i];
        dst[D + KV + kv + i] += src[2 * D + h * hd + i];
      }
    }
  }
}

}  // namespace sal::kernels::cpu
