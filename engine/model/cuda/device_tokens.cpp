// device_tokens.cpp — see device_tokens.h.
#include "model/cuda/device_tokens.h"

#include <climits>

#include "kernels/cuda/loss.h"

namespace sal::model {

Status DeviceTokens::check_step(const Batch& b, int64_t global_tokens) {
  if (b.sequences < 0 || b.seq_len < 0 || int64_t(b.sequences) * b.seq_len > INT_MAX)
    return fail("batch of ", b.sequences, " x ", b.seq_len, " tokens out of range");
  const int N = b.sequences * b.seq_len;
  if (b.targets.size() != size_t(N)) return fail("batch holds ", b.targets.size(), " targets for ", N, " tokens");
  if (global_tokens < 1) return fail("global_tokens = ", global_tokens, " (the loss is normalised by it)");
  return {};
}

Status DeviceTokens::check_forward(const std::vector<int32_t>& ids, int B, int T, int seq_len) {
  if (T > seq_len) return fail("sequence of ", T, " tokens exceeds model.seq_len = ", seq_len);
  if (B < 0 || T < 0 || int64_t(B) * T > INT_MAX) return fail("batch of ", B, " x ", T, " tokens out of range");
  if (ids.size() != size_t(B) * size_t(T)) return fail("batch holds ", ids.size(), " ids for ", B, " x ", T, " tokens");
  return {};
}

Status DeviceTokens::check_sequence(const std::vector<int32_t>& ids) {
  if (ids.empty()) return fail("no tokens to continue");
  if (ids.size() > size_t(INT_MAX)) return fail("too many tokens");
  return {};
}

Status DeviceTokens::reserve(const kc::Context& ctx, size_t n) {
  for (auto [buf, size] : {std::pair{&ids_, n}, {&targets_, n}, {&bad_ids_, size_t(1)}, {&bad_targets_, size_t(1)}})
    SAL_GPU_TRY(ensure(ctx, *buf, size));
  SAL_GPU_TRY(ensure(ctx, loss_, 1));
  return gpu_status(ensure(ctx, ce_scratch_, kc::cross_entropy_scratch_doubles(int(n))));
}

Status DeviceTokens::upload_ids(const kc::Context& ctx, const std::vector<int32_t>& ids) {
  return gpu_status(upload_async(ctx, ids_.get(), ids, "cudaMemcpyAsync (token ids)"));
}

Status DeviceTokens::loss_forward(const kc::Context& ctx, const float* logits, float* probs,
                                  const std::vector<int32_t>& targets, int V) {
  SAL_GPU_TRY(upload_async(ctx, targets_.get(), targets, "cudaMemcpyAsync (targets)"));
  return gpu_status(kc::cross_entropy_forward(ctx, logits, targets_.get(), probs, int(targets.size()), V, loss_.get(),
                                              bad_targets_.get(), ce_scratch_.get()));
}

Result<double> DeviceTokens::finish(const kc::Context& ctx, int V, bool targets) {
  int32_t ids = 0, bad = 0;
  double ce = 0;
  SAL_GPU_TRY(download_async(ctx, &ids, bad_ids_.get(), 1, "cudaMemcpyAsync (bad ids)"));
  if (targets) {
    SAL_GPU_TRY(download_async(ctx, &bad, bad_targets_.get(), 1, "cudaMemcpyAsync (bad targets)"));
    SAL_GPU_TRY(download_async(ctx, &ce, loss_.get(), 1, "cudaMemcpyAsync (loss)"));
  }
  SAL_GPU_TRY(ctx.synchronize());
  if (ids > 0) return fail(ids, " token ids outside the vocabulary of ", V);
  if (bad > 0) return fail(bad, " targets outside the vocabulary of ", V);
  return ce;
}

Result<std::vector<float>> DeviceTokens::last_logits(const kc::Context& ctx, const float* logits, int T, int V) {
  std::vector<float> out(static_cast<size_t>(V));
  SAL_GPU_TRY(download_async(ctx, out.data(), logits + size_t(T - 1) * V, size_t(V), "cudaMemcpyAsync (logits)"));
  if (auto done = finish(ctx, V, false); !done) return done.error();
  return out;
}

}  // namespace sal::model
