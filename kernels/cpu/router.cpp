// router.cpp — see router.h. Plain loops over tokens (the router is a sliver of a step's work);
// each written once so that the GPU's kernels can follow the same order.
#include "kernels/cpu/router.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/blas1.h"
#include "kernels/cpu/softmax.h"

namespace sal::kernels::cpu {

void sigmoid_forward(const float* z, float* s, size_t n) {
  for (size_t i = 0; i < n; ++i) s[i] = 1.0f / (1.0f + std::exp(-z[i]));
}

void topk_weights(const float* chosen, float* w, int N, int K, bool norm) {
  for (int t = 0; t < N; ++t) {
    const float* c = chosen + size_t(t) * K;
    double sum = 0;
    for (int j = 0; j < K; ++j) sum += c[j];
    for (int j = 0; j < K; ++j) w[size_t(t) * K + j] = norm && sum > 0 ? float(c[j] / sum) : c[j];
  }
}

void normalise_rows(const float* s, float* q, int N, int E) {
  for (int t = 0; t < N; ++t) {
    const float* r = s + size_t(t) * E;
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += r[e];
    for (int e = 0; e < E; ++e) q[size_t(t) * E + e] = float(r[e] / sum);
  }
}

void row_logsumexp(const float* z, float* lse, int N, int E) {
  for (int t = 0; t < N; ++t) {
    const float* r = z + size_t(t) * E;
    const float mx = *std::max_element(r, r + E);
    double s = 0;
    for (int e = 0; e < E; ++e) s += std::exp(double(r[e] - mx));
    lse[t] = mx + float(std::log(s));
  }
}

void router_dscores(const RouterGrad& g, int N, int E, int K, float* dscores) {
  for (int t = 0; t < N; ++t) {
    const float* s = g.scores + size_t(t) * E;
    float* ds = dscores + size_t(t) * E;
    const float* w = g.w + size_t(t) * K;
    const float* dw = g.dw + size_t(t) * K;
    double sum = 0, dot = 0;  // the chosen scores' sum; sum_j dw_j w_j
    for (int j = 0; j < K; ++j) sum += g.chosen[size_t(t) * K + j], dot += double(dw[j]) * w[j];
    if (g.sigmoid) {  // the balancing loss's gradient through q = s / sum s
      double all = 0, dq_dot_q = 0;
      for (int e = 0; e < E; ++e) all += s[e];
      for (int e = 0; e < E; ++e) dq_dot_q += g.aux_scale * g.f[e] * s[e] / all;
      for (int e = 0; e < E; ++e) ds[e] = float((g.aux_scale * g.f[e] - dq_dot_q) / all);
    } else {
      for (int e = 0; e < E; ++e) ds[e] = float(g.aux_scale * g.f[e]);
    }
    for (int j = 0; j < K; ++j) {
      const double dc = g.norm && sum > 0 ? (dw[j] - dot) / sum : dw[j];
      ds[g.idx[size_t(t) * K + j]] += float(dc);
    }
  }
}

void router_dlogits(const float* z, const float* scores, const float* dscores, const float* lse, double z_scale,
                    bool sigmoid, int N, int E, float* dz) {
  const size_t n = size_t(N) * E;
  if (sigmoid)
    for (size_t i = 0; i < n; ++i) dz[i] = dscores[i] * scores[i] * (1.0f - scores[i]);
  else
    softmax_backward(scores, dscores, dz, N, E);
  if (z_scale <= 0) return;
  for (int t = 0; t < N; ++t)  // d/dz (lse^2) = 2 lse softmax(z)
    for (int e = 0; e < E; ++e) {
      const size_t i = size_t(t) * E + e;
      dz[i] += float(z_scale * lse[t] * std::exp(double(z[i] - lse[t])));
    }
}

void shared_gate_forward(const float* z, const float* out, float* next, float* g, int N, int D) {
  for (int t = 0; t < N; ++t) {
    g[t] = 1.0f / (1.0f + std::exp(-z[t]));
    axpy(size_t(D), g[t], out + size_t(t) * D, next + size_t(t) * D);
  }
}

void shared_gate_backward(const float* g, const float* out, const float* dy, float* dout, float* dz, int N, int D) {
  for (int t = 0; t < N; ++t) {
    const float* o = out + size_t(t) * D;
    const float* d = dy + size_t(t) * D;
    double dg = 0;  // d loss / d g = out . dy
    for (int i = 0; i < D; ++i) {
      dg += double(o[i]) * d[i];
      dout[size_t(t) * D + i] = g[t] * d[i];
    }
    dz[t] = float(dg) * g[t] * (1.0f - g[t]);
  }
}

}  // namespace sal::kernels::cpu
