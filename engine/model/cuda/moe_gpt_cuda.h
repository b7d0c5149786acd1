// moe_gpt_cuda.h — the moe-gpt model (model/moe_gpt.h) on one GPU: the same function, in the same
// order of operations, on a DeviceParams; gradients accumulate into the device units, and the
// experts are reached through a DeviceExchange.
//
// What matches the CPU model exactly: the architecture and op order; the cross-entropy normalised by
// the *global* token count; the Switch balancing loss from global statistics (per-expert counts
// and gate-probability sums go through DeviceExchange::global_stats, on the host, in double, and its
// gradient constant per expert is formed on the host as the CPU forms it); the combine weight is
// the un-renormalised gate probability; forced routing (Dims::skew) draws the same experts from the
// same hash (on the host: it depends only on positions and token ids).
//
// Precision: fp32 activations, gradients and master weights; bf16 operands with fp32 accumulation
// for the qkv and attention-output projections, the attention products and the experts; fp32
// (gemm_f32, no TF32) for the gate, whose d x E product is tiny and whose top-k choices bf16 could
// flip against the CPU; the tied LM head in fp32 up to kF32HeadMaxVocab tokens (exact and cheap at
// byte level) and in bf16 above (DeviceParams decides; see LmHead). So losses and gradients agree
// with the CPU's to about 1e-2 relative, not bit for bit; routing agrees except where two experts'
// gate probabilities are within that error of each other.
//
// Host round trips per step: one per layer in the forward pass (the gate statistics, for
// global_stats), whatever the exchange needs (LocalDeviceExchange: one per layer), and one at the
// end (the loss and the bad-id counts). An id or target outside the vocabulary makes step() fail
// after the pass (the CPU stops the process there; a GPU kernel only counts them).
#pragma once

#include <cstdint>
#include <vector>

#include "model/cuda/device_exchange.h"
#include "model/cuda/device_model.h"
#include "model/cuda/device_params.h"
#include "model/cuda/device_tokens.h"
#include "model/data.h"
#include "model/moe_gpt.h"

namespace sal::model {

class MoeGptCuda : public DeviceModel {
 public:
  // Runs on p's Context; p must outlive the model.
  explicit MoeGptCuda(DeviceParams& p);

  // Forward and backward on the local batch; gradients accumulate into p's units. global_tokens:
  // tokens of the whole global batch. Waits for the stream at the end (to read the loss back).
  Result<StepStats> step(const Batch& b, int64_t global_tokens, DeviceExchange& ex) override;

  // Forward only, one sequence of up to seq_len tokens: the logits [V] of the last position.
  Result<std::vector<float>> next_logits(const std::vector<int32_t>& ids, DeviceExchange& ex) override;

 private:
  // One layer's saved activations (device), as the CPU's LayerActs, with bf16 copies of the GEMM
  // inputs the backward reuses.
  struct LayerActs {
    kc::Buffer<float> x, mean1, rstd1, qkv, att_probs, xmid, mean2, rstd2, h2, gate_probs, w, aux;
    kc::Buffer<kc::Bf16> h1_16, att16;
    kc::Buffer<int32_t> idx;
    kc::Buffer<uint32_t> counts;
    std::vector<int32_t> idx_host;  // forced routing only
    std::vector<float> aux_host;    // the balancing loss's d/dP per expert (uploaded to aux)
  };

  Status reserve(int B, int T);
  Status forward(const std::vector<int32_t>& inputs, int B, int T, DeviceExchange& ex, StepStats& stats);
  Status forward_layer(int l, int B, int T, DeviceExchange& ex, StepStats& stats);
  Status backward(int B, int T, int64_t global_tokens, DeviceExchange& ex);
  Status backward_layer(int l, int B, int T, DeviceExchange& ex);
  void force_routing(int l, int N, int T, std::vector<int32_t>& idx) const;
  DeviceRouting routing(int l, int N) const;

  const kc::Context& ctx_;
  DeviceParams& p_;
  std::vector<LayerActs> acts_;
  const std::vector<int32_t>* inputs_ = nullptr;  // the host ids forward() runs on (forced routing)
  const Batch* batch_ = nullptr;  // step()'s batch while it runs (replayed routing places its tokens)
  int64_t global_tokens_ = 0;     // step()'s
  double aux_share_ = 1.0;        // step()'s Batch::aux_share: the balancing loss's weight (a group's shard type)
  int cap_tokens_ = 0, cap_b_ = 0, cap_t_ = 0;    // what reserve() sized the buffers for

  // Final stream, LM head, loss.
  DeviceTokens tokens_;
  kc::Buffer<float> x_final_, xf_, meanf_, rstdf_, logits_, probs_;
  kc::Buffer<kc::Bf16> xf16_, dlogits16_;  // bf16 head only
  kc::Buffer<double> prob_sums_;
  // Scratch shared by the layers (contents dead between uses).
  kc::Buffer<float> h1_, att_, moe_out_, gate_logits_, dprobs_, dw_;
  kc::Buffer<float> dres_, dxmid_, datt_, dqkv_, dh1_, dh2_, dxf_, ln_scratch_;
  kc::Buffer<kc::Bf16> grad16_;  // [N, 3d] bf16 copy of an output gradient for the weight GEMMs
  kc::Buffer<char> att_scratch_;
  std::vector<uint32_t> counts_host_;
  std::vector<double> prob_sums_host_;
};

}  // namespace sal::model
