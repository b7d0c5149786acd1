// attention.cpp — see attention.h. For one (b, h), with rows [r0, r1) a block of queries that can
// see keys [0, r1):
//   forward:  S = scale q[r0:r1] k[0:r1]^T;  P = causal softmax of S;  out[r0:r1] = P v[0:r1]
//   backward: dP = dout[r0:r1] v[0:r1]^T;  dS = P * (dP - rowsum(P * dP))
//             dq[r0:r1] = scale dS k[0:r1];  dk[0:r1] += scale dS^T q[r0:r1];  dv[0:r1] += P^T dout[r0:r1]
// The backward visits blocks last to first: the last block reaches every key, so its products
// overwrite dk, dv (beta = 0) and the earlier ones accumulate. The (b, h) pairs are spread over the
// pool; their GEMMs, issued from inside a task, run on that task's thread.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/cpu/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/cpu/vecmath.h"

namespace sal::kernels::cpu {
namespace {

// One (b, h): pointers to its q, k, v (and their gradients) inside the packed rows, the row strides.
struct Head {
  int T, C, hs;
  float scale;
  int ld() const { return 3 * C; }  // row stride of qkv and dqkv
};

// Rows [r0, r1) of P hold S for keys [0, r1): softmax over keys [0, t] of row t, zeros after.
SAL_KERNEL_CLONES
void causal_softmax_rows(float* P, int T, int r0, int r1) {
  for (int t = r0; t < r1; ++t) {
    float* row = P + size_t(t) * T;
    softmax_row(row, row, t + 1);
    std::fill(row + t + 1, row + T, 0.0f);
  }
}

// dS rows [0, r1-r0) (row stride T) hold dP for query rows [r0, r1): replaced by the gradient of S.
SAL_KERNEL_CLONES
void causal_softmax_grad_rows(const float* P, float* dS, int T, int r0, int r1) {
  for (int t = r0; t < r1; ++t) {
    const float* p = P + size_t(t) * T;
    float* d = dS + size_t(t - r0) * T;
    const float dot = vm::lane_sum(t + 1, [&](int j) { return p[j] * d[j]; });
    for (int j = 0; j <= t; ++j) d[j] = p[j] * (d[j] - dot);
    std::fill(d + t + 1, d + r1, 0.0f);
  }
}

void head_forward(const Head& h, const float* qkv, float* out, float* P) {
  const int T = h.T, C = h.C, ld = h.ld();
  const float *q = qkv, *k = qkv + C, *v = qkv + 2 * C;
  for (int r0 = 0; r0 < T; r0 += kCausalBlock) {
    const int r1 = std::min(T, r0 + kCausalBlock), rows = r1 - r0;
    float* Pb = P + size_t(r0) * T;
    gemm_ld(false, true, rows, r1, h.hs, h.scale, q + size_t(r0) * ld, ld, k, ld, 0.0f, Pb, T);
    causal_softmax_rows(P, T, r0, r1);
    gemm_ld(false, false, rows, h.hs, r1, 1.0f, Pb, T, v, ld, 0.0f, out + size_t(r0) * C, C);
  }
}

// dS: scratch of kCausalBlock * T floats.
void head_backward(const Head& h, const float* dout, const float* qkv, const float* P, float* dqkv, float* dS) {
  const int T = h.T, C = h.C, ld = h.ld();
  const float *q = qkv, *k = qkv + C, *v = qkv + 2 * C;
  float *dq = dqkv, *dk = dqkv + C, *dv = dqkv + 2 * C;
  float beta = 0.0f;  // the first block visited (the last) overwrites dk and dv
  for (int r0 = (T - 1) / kCausalBlock * kCausalBlock; r0 >= 0; r0 -= kCausalBlock) {
    const int r1 = std::min(T, r0 + kCausalBlock), rows = r1 - r0;
    const float* dout_b = dout + size_t(r0) * C;
    const float* Pb = P + size_t(r0) * T;
    gemm_ld(false, true, rows, r1, h.hs, 1.0f, dout_b, C, v, ld, 0.0f, dS, T);
    causal_softmax_grad_rows(P, dS, T, r0, r1);
    gemm_ld(false, false, rows, h.hs, r1, h.scale, dS, T, k, ld, 0.0f, dq + size_t(r0) * ld, ld);
    gemm_ld(true, false, r1, h.hs, rows, h.scale, dS, T, q + size_t(r0) * ld, ld, beta, dk, ld);
    gemm_ld(true, false, r1, h.hs, rows, 1.0f, Pb, T, dout_b, C, beta, dv, ld);
    beta = 1.0f;
  }
}

Head make_head(int B, int T, int C, int H) {
  SAL_KCHECK(B >= 0 && T >= 0 && H >= 1 && C >= H && C % H == 0, "attention needs C divisible by H");
  const int hs = C / H;
  return Head{T, C, hs, 1.0f / std::sqrt(float(hs))};
}

}  // namespace

void attention_forward(const float* qkv, float* out, float* probs, int B, int T, int C, int H) {
  const Head h = make_head(B, T, C, H);
  if (B == 0 || T == 0) return;
  detail::parallel_for(size_t(B) * H, 1, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / H, hd = i % H;
      head_forward(h, qkv + b * T * h.ld() + hd * h.hs, out + b * T * C + hd * h.hs, probs + i * T * T);
    }
  });
}

void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv, int B, int T,
                        int C, int H) {
  const Head h = make_head(B, T, C, H);
  if (B == 0 || T == 0) return;
  detail::parallel_for(size_t(B) * H, 1, [&](size_t i0, size_t i1) {
    float* dS = detail::thread_scratch(size_t(kCausalBlock) * T);
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / H, hd = i % H, off = b * T * h.ld() + hd * h.hs;
      head_backward(h, dout + b * T * C + hd * h.hs, qkv + off, probs + i * T * T, dqkv + off, dS);
    }
  });
}

}  // namespace sal::kernels::cpu
