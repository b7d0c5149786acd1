// optimizer_cuda.cpp — see optimizer_cuda.h.
#include "model/cuda/optimizer_cuda.h"

#include <cuda_runtime_api.h>

#include <cmath>

#include "kernels/cuda/optim.h"

namespace sal::model {

OptimizerCuda::OptimizerCuda(DeviceParams& p, const OptimConfig& c) : p_(p), ctx_(p.context()), c_(c) {}

Status OptimizerCuda::grad_sum_squares(double* out) {
  SAL_GPU_TRY(ensure(ctx_, scratch_, kc::kSumSquaresMaxBlocks));
  bool first = true;
  for (DeviceUnit* u : p_.units()) {
    if (u->frozen) continue;
    if (first)
      SAL_GPU_TRY(kc::sum_squares(ctx_, u->g.get(), u->size, out, scratch_.get()));
    else
      SAL_GPU_TRY(kc::add_sum_squares(ctx_, u->g.get(), u->size, out, scratch_.get()));
    first = false;
  }
  if (first)  // every unit frozen: no gradient
    SAL_GPU_TRY(kc::cuda_status(int(cudaMemsetAsync(out, 0, sizeof(double), ctx_.stream())), "cudaMemsetAsync (norm)"));
  return {};
}

Status OptimizerCuda::adamw_units(double lr, int64_t t) {
  const Dims& d = p_.dims();
  SAL_TRY(p_.fence_writes());  // a snapshot's copy may still be reading the values and moments
  for (DeviceUnit* u : p_.units()) {
    if (u->frozen) continue;  // its gradient is not the model's: it stays as the replay loaded it
    for (const DecayRun& r : decay_runs(d, u->id.kind, u->size))
      SAL_GPU_TRY(kc::adamw(ctx_, u->w.get() + r.begin, u->g.get() + r.begin, u->m.get() + r.begin,
                            u->v.get() + r.begin, r.end - r.begin, float(lr), float(c_.beta1), float(c_.beta2),
                            float(c_.eps), r.decay ? float(c_.weight_decay) : 0.0f, t));
  }
  return p_.refresh_bf16();
}

Status OptimizerCuda::step(int64_t step) {
  if (step < 0) return fail("OptimizerCuda::step: step ", step, " < 0");
  SAL_GPU_TRY(ensure(ctx_, norm2_, 1));
  SAL_TRY(grad_sum_squares(norm2_.get()));
  // model::clip_scale's factor, applied where the norm lives (every tensor sees the same double)
  for (DeviceUnit* u : p_.units()) SAL_GPU_TRY(kc::clip_scale(ctx_, u->g.get(), u->size, norm2_.get(), c_.clip));
  return adamw_units(learning_rate(c_, step), step + 1);
}

Status OptimizerCuda::apply_adamw(double lr, double grad_scale, int64_t t) {
  if (t < 1) return fail("OptimizerCuda::apply_adamw: t = ", t, " (counts from 1)");
  if (grad_scale != 1.0)
    for (DeviceUnit* u : p_.units()) SAL_GPU_TRY(kc::scale(ctx_, u->g.get(), u->size, float(grad_scale)));
  return adamw_units(lr, t);
}

Result<double> OptimizerCuda::last_norm() {
  if (norm2_.size() == 0) return fail("OptimizerCuda::last_norm: no step yet");
  double n2 = 0;
  SAL_GPU_TRY(kc::cuda_status(
      int(cudaMemcpyAsync(&n2, norm2_.get(), sizeof(double), cudaMemcpyDeviceToHost, ctx_.stream())),
      "cudaMemcpyAsync (grad norm)"));
  SAL_GPU_TRY(ctx_.synchronize());
  return std::sqrt(n2);
}

Result<std::vector<double>> OptimizerCuda::unit_grad_sum_squares() {
  std::vector<DeviceUnit*> us = p_.units();
  SAL_GPU_TRY(ensure(ctx_, scratch_, kc::kSumSquaresMaxBlocks));
  SAL_GPU_TRY(ensure(ctx_, per_unit_, us.size()));
  for (size_t i = 0; i < us.size(); ++i)
    SAL_GPU_TRY(kc::sum_squares(ctx_, us[i]->g.get(), us[i]->size, per_unit_.get() + i, scratch_.get()));
  std::vector<double> out(us.size());
  SAL_GPU_TRY(kc::cuda_status(int(cudaMemcpyAsync(out.data(), per_unit_.get(), us.size() * sizeof(double),
                                                  cudaMemcpyDeviceToHost, ctx_.stream())),
                              "cudaMemcpyAsync (unit sums of squares)"));
  SAL_GPU_TRY(ctx_.synchronize());
  for (size_t i = 0; i < us.size(); ++i)
    if (us[i]->frozen) out[i] = 0;  // as the CPU, which computes no gradient for it
  return out;
}

}  // namespace sal::model
