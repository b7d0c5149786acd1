// device_experts.cpp — see device_experts.h. The tables of the held experts' weights and gradients
// are built from the DeviceParams on every call (a few pointers per expert): null for an expert not
// held, which the dispatch has already refused rows for.
#include "model/cuda/device_experts.h"

#include "kernels/cuda/swiglu_experts.h"

namespace sal::model {
namespace {

Status check_rows(const Dims& d, int layer, const std::vector<int>& rows) {
  if (layer < 0 || layer >= d.layers) return fail("experts: layer ", layer, " out of range");
  if (rows.size() != size_t(d.experts))
    return fail("experts: ", rows.size(), " row counts for the ", d.experts, " experts of layer ", layer);
  return {};
}

void gelu_tables(DeviceParams& p, int layer, std::vector<kc::ExpertParams>& ps, std::vector<kc::ExpertGrads>& gs) {
  const ExpertLayout l = expert_layout(p.dims());
  ps.assign(size_t(p.dims().experts), kc::ExpertParams{});
  gs.assign(size_t(p.dims().experts), kc::ExpertGrads{});
  for (int e = 0; e < p.dims().experts; ++e) {
    DeviceUnit* u = p.expert(layer, e);
    if (!u) continue;
    ps[size_t(e)] = {u->at16(l.w1), u->at(l.b1), u->at16(l.w2), u->at(l.b2)};
    gs[size_t(e)] = {u->grad(l.w1), u->grad(l.b1), u->grad(l.w2), u->grad(l.b2)};
  }
}

void swiglu_tables(DeviceParams& p, int layer, std::vector<kc::SwigluExpertParams>& ps,
                   std::vector<kc::SwigluExpertGrads>& gs) {
  const ExpertLayout l = expert_layout(p.dims());
  ps.assign(size_t(p.dims().experts), kc::SwigluExpertParams{});
  gs.assign(size_t(p.dims().experts), kc::SwigluExpertGrads{});
  for (int e = 0; e < p.dims().experts; ++e) {
    DeviceUnit* u = p.expert(layer, e);
    if (!u) continue;
    ps[size_t(e)] = {u->at16(l.w1), u->at16(l.w2)};
    gs[size_t(e)] = {u->grad(l.w1), u->grad(l.w2)};
  }
}

}  // namespace

size_t expert_hidden_floats(const Dims& d) { return d.llama() ? 2 * size_t(d.ffn()) : size_t(d.ffn()); }

size_t expert_scratch_bytes(const Dims& d, size_t rows) {
  return d.llama() ? kc::swiglu_experts_scratch_bytes(int(rows), d.d, d.ffn())
                   : kc::expert_mlp_scratch_bytes(int(rows), d.d);
}

Status experts_forward(DeviceParams& p, int layer, kc::GroupedGemmMode mode, const std::vector<int>& rows,
                       const float* x, float* out, const ExpertRows& saved, void* scratch, size_t scratch_bytes) {
  const Dims& d = p.dims();
  SAL_TRY(check_rows(d, layer, rows));
  const kc::Context& ctx = p.context();
  if (d.llama()) {
    std::vector<kc::SwigluExpertParams> ps;
    std::vector<kc::SwigluExpertGrads> gs;
    swiglu_tables(p, layer, ps, gs);
    return gpu_status(kc::swiglu_experts_forward(ctx, d.experts, rows.data(), d.d, d.ffn(), ps.data(), x, out,
                                                 kc::SwigluSaved{saved.x16, saved.h}, scratch, scratch_bytes));
  }
  std::vector<kc::ExpertParams> ps;
  std::vector<kc::ExpertGrads> gs;
  gelu_tables(p, layer, ps, gs);
  return gpu_status(kc::expert_mlp_forward(ctx, mode, d.experts, rows.data(), d.d, ps.data(), x, out,
                                           kc::ExpertSaved{saved.x16, saved.h}, scratch, scratch_bytes));
}

Status experts_backward(DeviceParams& p, int layer, kc::GroupedGemmMode mode, const std::vector<int>& rows,
                        const ExpertRows& saved, const float* dout, float* dx, void* scratch, size_t scratch_bytes) {
  const Dims& d = p.dims();
  SAL_TRY(check_rows(d, layer, rows));
  const kc::Context& ctx = p.context();
  if (d.llama()) {
    std::vector<kc::SwigluExpertParams> ps;
    std::vector<kc::SwigluExpertGrads> gs;
    swiglu_tables(p, layer, ps, gs);
    return gpu_status(kc::swiglu_experts_backward(ctx, d.experts, rows.data(), d.d, d.ffn(), ps.data(),
                                                  kc::SwigluSaved{saved.x16, saved.h}, dout, dx, gs.data(), scratch,
                                                  scratch_bytes));
  }
  std::vector<kc::ExpertParams> ps;
  std::vector<kc::ExpertGrads> gs;
  gelu_tables(p, layer, ps, gs);
  return gpu_status(kc::expert_mlp_backward(ctx, mode, d.experts, rows.data(), d.d, ps.data(),
                                            kc::ExpertSaved{saved.x16, saved.h}, dout, dx, gs.data(), scratch,
                                            scratch_bytes));
}

}  // namespace sal::model
