// local_exchange.cpp — see local_exchange.h.
#include "model/local_exchange.h"

#include <algorithm>

namespace sal::model {

Status LocalExchange::forward(int layer, const float* x, const Routing& r, float* out) {
  int D = p_.dims.d;
  for (int e = 0; e < p_.dims.experts; ++e) {
    Saved& s = saved_[{layer, e}];
    s.slots.clear();
    for (int slot = 0; slot < r.tokens * r.k; ++slot)
      if (r.idx[size_t(slot)] == e) s.slots.push_back(slot);
    s.block.rows = int(s.slots.size());
    if (s.slots.empty()) continue;
    Unit* u = p_.expert(layer, e);
    if (!u) return fail("layer ", layer, " expert ", e, " has tokens but is not held here");
    s.block.x.resize(s.slots.size() * size_t(D));
    for (size_t i = 0; i < s.slots.size(); ++i) {
      const float* src = x + size_t(s.slots[i] / r.k) * D;
      std::copy(src, src + D, s.block.x.begin() + long(i) * D);
    }
    std::vector<float> y(s.slots.size() * size_t(D));
    expert_forward(p_.dims, *u, s.block, y.data());
    for (size_t i = 0; i < s.slots.size(); ++i)
      std::copy(y.begin() + long(i) * D, y.begin() + long(i + 1) * D, out + size_t(s.slots[i]) * D);
  }
  return {};
}

Status LocalExchange::backward(int layer, const float* d_out, float* dx) {
  int D = p_.dims.d;
  for (int e = 0; e < p_.dims.experts; ++e) {
    Saved& s = saved_[{layer, e}];
    if (s.slots.empty()) continue;
    std::vector<float> dy(s.slots.size() * size_t(D)), dxe(dy.size());
    for (size_t i = 0; i < s.slots.size(); ++i)
      std::copy(d_out + size_t(s.slots[i]) * D, d_out + size_t(s.slots[i] + 1) * D, dy.begin() + long(i) * D);
    expert_backward(p_.dims, *p_.expert(layer, e), s.block, dy.data(), dxe.data());
    for (size_t i = 0; i < s.slots.size(); ++i)
      std::copy(dxe.begin() + long(i) * D, dxe.begin() + long(i + 1) * D, dx + size_t(s.slots[i]) * D);
  }
  return {};
}

}  // namespace sal::model
