// device_model.h — a model family on one GPU, as the GPU worker drives it: a training step on the
// local batch (forward and backward, gradients accumulating into the DeviceParams' units, the
// experts reached through a DeviceExchange) and the logits of a sequence's last position.
// make_device_model picks the family from the parameters' dims — moe-gpt (MoeGptCuda) or moe-llama
// (MoeLlamaCuda) — and refuses, by its key, what the GPU path does not build.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/result.h"
#include "model/cuda/device_exchange.h"
#include "model/cuda/device_params.h"
#include "model/data.h"
#include "model/model.h"

namespace sal::model {

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  // Forward and backward on the local batch; global_tokens: the whole global batch's. Waits for the
  // stream at the end (to read the loss back).
  virtual Result<StepStats> step(const Batch& b, int64_t global_tokens, DeviceExchange& ex) = 0;
  // Forward only, one sequence of up to seq_len tokens: the logits [V] of the last position.
  virtual Result<std::vector<float>> next_logits(const std::vector<int32_t>& ids, DeviceExchange& ex) = 0;
};

// The family's model on p (which must outlive it), or why the GPU path cannot run it.
Result<std::unique_ptr<DeviceModel>> make_device_model(DeviceParams& p);

}  // namespace sal::model
