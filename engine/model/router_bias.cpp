// router_bias.cpp — see router_bias.h.
#include "model/router_bias.h"

#include <cmath>

#include "kernels/cpu/ops.h"

namespace sal::model {

namespace {

// A load this close to the mean (relative) counts as the mean: the shares are ratios of counts, so
// a balanced expert's share times E may miss 1 by a rounding.
constexpr double kBalanced = 1e-9;

// +1 under the mean share 1/E, -1 over it, 0 at it.
int direction(double share, int E) {
  const double rel = share * E - 1.0;
  if (std::fabs(rel) <= kBalanced) return 0;
  return rel < 0 ? 1 : -1;
}

}  // namespace

RouterLoad zero_load(const Dims& d) {
  if (!d.llama() || !d.router_bias) return {};
  return RouterLoad(size_t(d.layers), std::vector<double>(size_t(d.experts), 0.0));
}

void add_router_load(RouterLoad& into, const RouterLoad& from) {
  if (into.size() < from.size()) into.resize(from.size());
  for (size_t l = 0; l < from.size(); ++l) {
    if (into[l].size() < from[l].size()) into[l].resize(from[l].size(), 0.0);
    for (size_t e = 0; e < from[l].size(); ++e) into[l][e] += from[l][e];
  }
}

void biased_topk(const float* scores, const float* bias, int N, int E, int K, int32_t* idx, float* chosen) {
  if (!bias) {
    kernels::cpu::topk(scores, N, E, K, idx, chosen);
    return;
  }
  std::vector<float> biased(size_t(N) * E);
  for (int t = 0; t < N; ++t)
    for (int e = 0; e < E; ++e) biased[size_t(t) * E + e] = scores[size_t(t) * E + e] + bias[e];
  kernels::cpu::topk(biased.data(), N, E, K, idx, chosen);
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < K; ++j) chosen[size_t(t) * K + j] = scores[size_t(t) * E + idx[size_t(t) * K + j]];
}

Status update_router_bias(Params& p, const RouterLoad& load) {
  const Dims& d = p.dims;
  if (!d.llama() || !d.router_bias) return {};
  if (load.size() != size_t(d.layers))
    return fail("router bias: loads of ", load.size(), " layers, the model has ", d.layers);
  const Slice b = gate_layout(d).bias;
  for (int l = 0; l < d.layers; ++l) {
    if (load[size_t(l)].size() != size_t(d.experts))
      return fail("router bias: layer ", l, " has loads of ", load[size_t(l)].size(), " experts, the model has ",
                  d.experts);
    Unit& gate = p.gate[size_t(l)];
    if (gate.frozen) continue;
    float* bias = gate.at(b);
    for (int e = 0; e < d.experts; ++e)
      bias[e] += float(d.bias_update * direction(load[size_t(l)][size_t(e)], d.experts));
  }
  return {};
}

std::vector<double> flatten_load(const RouterLoad& load) {
  std::vector<double> out;
  for (const auto& layer : load) out.insert(out.end(), layer.begin(), layer.end());
  return out;
}

RouterLoad unflatten_load(const std::vector<double>& flat, const RouterLoad& like) {
  RouterLoad out = like;
  size_t at = 0;
  for (auto& layer : out)
    for (double& v : layer) v = at < flat.size() ? flat[at++] : 0.0;
  return out;
}

}  // namespace sal::model
