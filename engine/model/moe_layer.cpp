// moe_layer.cpp — see moe_layer.h.
#include "model/moe_layer.h"

#include "kernels/cpu/blas1.h"

namespace sal::model {

Result<Balance> global_balance(ExpertExchange& ex, int layer, const std::vector<int32_t>& idx,
                               const std::vector<float>& scores, int N, int E, int K,
                               std::vector<uint32_t>& counts_out) {
  std::vector<double> counts(size_t(E), 0.0), prob_sums(size_t(E), 0.0);
  for (int32_t e : idx) counts[size_t(e)] += 1;
  for (int t = 0; t < N; ++t)
    for (int e = 0; e < E; ++e) prob_sums[size_t(e)] += scores[size_t(t) * E + e];
  for (int e = 0; e < E; ++e) counts_out[size_t(e)] = uint32_t(counts[size_t(e)]);
  Balance b;
  b.tokens = N;
  SAL_TRY(ex.global_stats(layer, counts, prob_sums, b.tokens));
  b.f.assign(size_t(E), 0.0);
  for (int e = 0; e < E; ++e) {
    b.f[size_t(e)] = b.tokens > 0 ? counts[size_t(e)] / (double(K) * b.tokens) : 0.0;
    b.loss += b.f[size_t(e)] * (b.tokens > 0 ? prob_sums[size_t(e)] / b.tokens : 0.0);
  }
  return b;
}

void combine(const std::vector<float>& out, const std::vector<float>& w, int N, int K, int D, std::vector<float>& next) {
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < K; ++j)
      kernels::cpu::axpy(size_t(D), w[size_t(t) * K + j], &out[(size_t(t) * K + j) * D], &next[size_t(t) * D]);
}

void combine_backward(const std::vector<float>& out, const std::vector<float>& w, const float* dy, int N, int K, int D,
                      std::vector<float>& dw, std::vector<float>& d_out) {
  dw.resize(size_t(N) * K);
  d_out.resize(size_t(N) * K * D);
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < K; ++j) {
      const float* o = &out[(size_t(t) * K + j) * D];
      const float* g = dy + size_t(t) * D;
      double dot = 0;
      for (int i = 0; i < D; ++i) dot += double(g[i]) * o[i];
      dw[size_t(t) * K + j] = float(dot);
      const float wt = w[size_t(t) * K + j];
      float* dst = &d_out[(size_t(t) * K + j) * D];
      for (int i = 0; i < D; ++i) dst[i] = wt * g[i];
    }
}

}  // namespace sal::model
