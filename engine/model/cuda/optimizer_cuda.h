// optimizer_cuda.h — model/optimizer.h's AdamW on a DeviceParams: the same update, decay rules
// (weight decay on the weight matrices — attention, gate, experts, token embedding — not on biases,
// LayerNorm parameters or position embeddings), learning-rate schedule (model::learning_rate, on
// the host) and global-norm clipping (model::clip_scale's factor).
//
// Two ways to run it:
//   step()         one GPU holding the whole model: the global norm is summed on the device over
//                  every unit (sum_squares / add_sum_squares into one device double), the clipping
//                  factor is applied on the device (kernels/cuda/optim.h clip_scale), so the step
//                  needs no host round trip; then AdamW per run of equal decay, then the bf16 copies
//                  are refreshed.
//   apply_adamw()  the norm came from elsewhere (several workers: each expert counted once, an
//                  all-reduce), and the scale is a host number, as model::apply_adamw takes it.
// unit_grad_sum_squares() gives each unit's sum of squares on the host, for such a distributed norm.
// Both make the stream wait first for a snapshot's copy still reading the values (DeviceParams::
// fence_writes): on the device, the host does not wait. Frozen units (DeviceUnit::frozen: a sparse
// window's replay) are left out of the norms and the update, as model::apply_adamw leaves them.
#pragma once

#include <cstdint>
#include <vector>

#include "model/cuda/device_params.h"
#include "model/optimizer.h"

namespace sal::model {

class OptimizerCuda {
 public:
  // Runs on p's Context; p must outlive the optimizer.
  OptimizerCuda(DeviceParams& p, const OptimConfig& c);

  // The sum of squares of every unit's gradient (each unit once) into *out (one device double,
  // overwritten). Enqueued on the stream.
  Status grad_sum_squares(double* out);

  // One update of the single-device model: step is the 0-based step (lr = learning_rate(c, step),
  // bias correction t = step + 1). Enqueued on the stream; nothing waits.
  Status step(int64_t step);

  // One update with gradients scaled by grad_scale (model::apply_adamw's arguments): t 1-based.
  Status apply_adamw(double lr, double grad_scale, int64_t t);

  // The global gradient norm the last step() clipped with (waits for the stream).
  Result<double> last_norm();

  // Each unit's sum of squared gradients, in DeviceParams::units() order (waits for the stream).
  Result<std::vector<double>> unit_grad_sum_squares();

  const OptimConfig& config() const { return c_; }

 private:
  Status adamw_units(double lr, int64_t t);

  DeviceParams& p_;
  const kc::Context& ctx_;
  OptimConfig c_;
  kc::Buffer<double> norm2_, per_unit_, scratch_;
};

}  // namespace sal::model
