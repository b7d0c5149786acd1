// device_exchange.cpp — see device_exchange.h. One host wait per forward: the expert row counts
// (the schedule's quotas) are needed on the host by the expert GEMMs, and the dispatch's verdict
// on unheld experts is read with them.
#include "model/cuda/device_exchange.h"

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/dispatch.h"
#include "kernels/cuda/permute.h"
#include "model/cuda/device_experts.h"

namespace sal::model {

LocalDeviceExchange::LocalDeviceExchange(DeviceParams& p, kc::GroupedGemmMode mode)
    : ctx_(p.context()), p_(p), mode_(mode) {}

kc::GroupedGemmMode LocalDeviceExchange::gemm_mode() const {
  return p_.dims().d % 8 == 0 ? mode_ : kc::GroupedGemmMode::per_group;
}

Status LocalDeviceExchange::check_routing(const char* fn, const DeviceRouting& r) const {
  const int E = p_.dims().experts;
  if (r.tokens < 0 || r.k < 1 || r.k > kc::kMaxTopK || r.k > E || int64_t(r.tokens) * r.k > kc::kMaxAssignments)
    return fail("LocalDeviceExchange::", fn, ": tokens = ", r.tokens, ", k = ", r.k, " (need tokens >= 0, 1 <= k <= ",
                kc::kMaxTopK, " and k <= experts = ", E, ")");
  if (E < 1 || E > kc::kMaxPermuteExperts) return fail("LocalDeviceExchange::", fn, ": experts = ", E, " out of range");
  if (r.tokens > 0 && (!r.idx || !r.w || !r.counts)) return fail("LocalDeviceExchange::", fn, ": null routing pointer");
  return {};
}

Status LocalDeviceExchange::forward(int layer, const DeviceRouting& r, const float* x, float* out) {
  SAL_TRY(check_routing("forward", r));
  const Dims& d = p_.dims();
  const int E = d.experts, D = d.d;
  if (layer < 0 || layer >= d.layers) return fail("LocalDeviceExchange::forward: layer ", layer, " out of range");
  const size_t n = size_t(r.tokens) * size_t(r.k);
  Saved& s = saved_[layer];
  s.tokens = -1;  // valid again only once this forward has succeeded

  // The schedule of one worker: every expert held here keeps all its tokens (quota = count); an
  // expert with tokens and no unit here is reported in bad_expert.
  units_host_.assign(size_t(E), 0);
  for (int e = 0; e < E; ++e) units_host_[size_t(e)] = p_.expert(layer, e) ? 1u : 0u;
  SAL_GPU_TRY(ensure(ctx_, units_, size_t(E)));
  SAL_GPU_TRY(ensure(ctx_, send_, size_t(E)));
  SAL_GPU_TRY(ensure(ctx_, quota_, size_t(E)));
  SAL_GPU_TRY(ensure(ctx_, bad_expert_, 1));
  SAL_GPU_TRY(ensure(ctx_, s.slot_rows, n));
  const size_t ws_bytes = kc::permute_workspace_bytes(r.tokens, r.k, E, 1);
  SAL_GPU_TRY(ensure(ctx_, permute_ws_, ws_bytes));
  SAL_GPU_TRY(kc::cuda_status(int(cudaMemcpyAsync(units_.get(), units_host_.data(), size_t(E) * sizeof(uint32_t),
                                                  cudaMemcpyHostToDevice, ctx_.stream())),
                              "cudaMemcpyAsync (exchange units)"));
  // counts is [E] = [E][W] with W = 1.
  SAL_GPU_TRY(kc::flexible_dispatch(ctx_, r.counts, units_.get(), E, 1, send_.get(), quota_.get(), bad_expert_.get()));
  SAL_GPU_TRY(kc::permute_rows(ctx_, r.idx, r.tokens, r.k, send_.get(), E, 1, 0, s.slot_rows.get(), permute_ws_.get(),
                               permute_ws_.size()));

  // The row counts on the host (the expert GEMMs are issued per expert from them).
  quota_host_.assign(size_t(E), 0);
  int32_t bad = -1;
  SAL_GPU_TRY(kc::cuda_status(int(cudaMemcpyAsync(quota_host_.data(), quota_.get(), size_t(E) * sizeof(uint32_t),
                                                  cudaMemcpyDeviceToHost, ctx_.stream())),
                              "cudaMemcpyAsync (exchange quotas)"));
  SAL_GPU_TRY(kc::cuda_status(int(cudaMemcpyAsync(&bad, bad_expert_.get(), sizeof(int32_t), cudaMemcpyDeviceToHost,
                                                  ctx_.stream())),
                              "cudaMemcpyAsync (exchange bad expert)"));
  SAL_GPU_TRY(ctx_.synchronize());
  if (bad >= 0) return fail("layer ", layer, " expert ", bad, " has tokens but is not held here");
  s.rows.assign(size_t(E), 0);
  size_t total = 0;
  for (int e = 0; e < E; ++e) {
    s.rows[size_t(e)] = int(quota_host_[size_t(e)]);
    total += quota_host_[size_t(e)];
  }
  // Ids outside [0, E) are not counted, so they show up as missing rows (the CPU would index out
  // of bounds there; here it is an error).
  if (total != n) return fail("layer ", layer, ": ", n - total, " of ", n, " assignments name no expert in [0, ", E, ")");

  SAL_GPU_TRY(ensure(ctx_, xperm_, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, s.y, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, s.x16, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, s.h, n * expert_hidden_floats(d)));
  SAL_GPU_TRY(ensure(ctx_, mlp_scratch_, expert_scratch_bytes(d, n)));

  SAL_GPU_TRY(kc::permute(ctx_, x, s.slot_rows.get(), r.tokens, r.k, D, xperm_.get()));
  SAL_TRY(experts_forward(p_, layer, gemm_mode(), s.rows, xperm_.get(), s.y.get(), ExpertRows{s.x16.get(), s.h.get()},
                          mlp_scratch_.get(), mlp_scratch_.size()));
  SAL_GPU_TRY(kc::unpermute_combine(ctx_, s.y.get(), s.slot_rows.get(), r.w, r.tokens, r.k, D, out));
  s.tokens = r.tokens;
  s.k = r.k;
  return {};
}

Status LocalDeviceExchange::backward(int layer, const DeviceRouting& r, const float* d_out, float* dx, float* d_w) {
  SAL_TRY(check_routing("backward", r));
  auto it = saved_.find(layer);
  if (it == saved_.end() || it->second.tokens < 0) return fail("layer ", layer, ": expert backward before forward");
  Saved& s = it->second;
  if (s.tokens != r.tokens || s.k != r.k)
    return fail("layer ", layer, ": expert backward for ", r.tokens, " tokens x ", r.k, " after a forward of ", s.tokens,
                " x ", s.k);
  const Dims& d = p_.dims();
  const int D = d.d;
  const size_t n = size_t(r.tokens) * size_t(r.k);
  SAL_GPU_TRY(ensure(ctx_, d_rows_, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, dx_rows_, n * size_t(D)));
  SAL_GPU_TRY(ensure(ctx_, mlp_scratch_, expert_scratch_bytes(d, n)));

  // d_rows = w * d_out per assignment (what goes back to the experts), d_w = dot(d_out, y).
  SAL_GPU_TRY(kc::unpermute_combine_backward(ctx_, d_out, s.y.get(), s.slot_rows.get(), r.w, r.tokens, r.k, D,
                                             d_rows_.get(), d_w));
  SAL_TRY(experts_backward(p_, layer, gemm_mode(), s.rows, ExpertRows{s.x16.get(), s.h.get()}, d_rows_.get(),
                           dx_rows_.get(), mlp_scratch_.get(), mlp_scratch_.size()));
  // dx[t] = sum over the token's assignments of the experts' input gradients, j in order.
  SAL_GPU_TRY(kc::permute_backward(ctx_, dx_rows_.get(), s.slot_rows.get(), r.tokens, r.k, D, dx));
  return {};
}

}  // namespace sal::model
