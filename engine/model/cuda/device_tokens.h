// device_tokens.h — what both families' GPU models keep around their loss: the batch's token ids
// and targets on the device, the out-of-vocabulary counts the embedding and cross-entropy kernels
// write (a kernel cannot stop the process as the CPU does on a bad id: it counts, and the step fails
// once the stream is read), and the cross-entropy's sum; and the step's argument checks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "model/cuda/device_params.h"
#include "model/data.h"

namespace sal::model {

class DeviceTokens {
 public:
  // A step's arguments: a batch of sizes in range with a target a token, a positive global count.
  static Status check_step(const Batch& b, int64_t global_tokens);
  // A forward pass's ids: B sequences of T <= seq_len tokens, B * T an int, one id a token.
  static Status check_forward(const std::vector<int32_t>& ids, int B, int T, int seq_len);
  // next_logits' sequence: not empty, its length an int.
  static Status check_sequence(const std::vector<int32_t>& ids);

  // Sizes the buffers for n tokens (growing only).
  Status reserve(const kc::Context& ctx, size_t n);
  // The ids on the device (enqueued).
  Status upload_ids(const kc::Context& ctx, const std::vector<int32_t>& ids);
  // Uploads the targets and enqueues the cross-entropy of logits [n, V] (probs written, its sum kept).
  Status loss_forward(const kc::Context& ctx, const float* logits, float* probs, const std::vector<int32_t>& targets,
                      int V);
  // Waits for the stream: the cross-entropy's sum (0 without loss_forward), or an error naming how
  // many ids — and targets, with `targets` — lay outside the vocabulary.
  Result<double> finish(const kc::Context& ctx, int V, bool targets);
  // next_logits' answer: the last of T rows of logits [T, V], downloaded once the stream is read
  // (finish() without targets: an id outside the vocabulary is the error).
  Result<std::vector<float>> last_logits(const kc::Context& ctx, const float* logits, int T, int V);

  const int32_t* ids() const { return ids_.get(); }
  const int32_t* targets() const { return targets_.get(); }
  int32_t* bad_ids() { return bad_ids_.get(); }

 private:
  kc::Buffer<int32_t> ids_, targets_, bad_ids_, bad_targets_;
  kc::Buffer<double> loss_, ce_scratch_;
};

}  // namespace sal::model
