// moe_llama_cuda.h — the moe-llama model (model/moe_llama.h) on one GPU: the same function, in the
// same order of operations, on a DeviceParams, each of the CPU model's operators by its
// kernels/cuda counterpart (norm.h's RMSNorm, rope.h, heads.h, attention.h, router.h,
// swiglu_experts.h); gradients accumulate into the device units, the routed experts are reached
// through a DeviceExchange (device_experts.h runs their SwiGLU MLPs), the shared experts run from
// the dense unit as one SwiGLU block over every token.
//
// What matches the CPU model exactly: the architecture and op order; the cross-entropy normalised
// by the global token count; the Switch balancing loss from global statistics (per-expert counts
// and score sums — the sigmoid scores normalised first, as the CPU does — through
// DeviceExchange::global_stats on the host in double, each expert's f uploaded in double for the
// scores' gradient); the z-loss's per-token logsumexp, summed on the host in double as the CPU
// sums it.
//
// Precision: as MoeGptCuda's. fp32 activations, gradients and master weights; bf16 operands with
// fp32 accumulation for the attention projections, the attention products, the routed and the
// shared experts; fp32 (gemm_f32) for the router and the shared experts' gate, whose top-k and
// sigmoid bf16 could move against the CPU; the LM head (tied or untied) in fp32 up to
// kF32HeadMaxVocab tokens and in bf16 above. Losses and gradients agree with the CPU's to about
// 1e-2 relative; routing agrees except where two experts' scores are within that error.
//
// Not built on the GPU: DeepSeek-V3's routing bias (model.bias_update; make_device_model refuses
// it), frozen units (as MoeGptCuda). Host round trips per step: one per layer in the forward (the
// router's statistics and logsumexps), the exchange's, and one at the end (the loss, the bad ids).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/cuda/device_exchange.h"
#include "model/cuda/device_model.h"
#include "model/cuda/device_params.h"
#include "model/cuda/device_tokens.h"
#include "model/data.h"

namespace sal::model {

class MoeLlamaCuda : public DeviceModel {
 public:
  // Runs on p's Context; p must outlive the model. p's dims are moe-llama's.
  explicit MoeLlamaCuda(DeviceParams& p);

  Result<StepStats> step(const Batch& b, int64_t global_tokens, DeviceExchange& ex) override;
  Result<std::vector<float>> next_logits(const std::vector<int32_t>& ids, DeviceExchange& ex) override;

 private:
  // One layer's saved activations (device), as the CPU's LayerActs.
  struct LayerActs {
    kc::Buffer<float> x, rstd1, qkv, full, att_probs, xmid, rstd2, h2;
    kc::Buffer<float> q_raw, k_raw, q_rstd, k_rstd;   // QK-norm: the queries and keys before it, its rstd
    kc::Buffer<float> z, scores, chosen, w, lse;      // router logits and scores [N,E]; chosen, weights [N,k]
    kc::Buffer<float> shared_h, shared_out, shared_g;  // shared experts: pre-activations, output, gate
    kc::Buffer<kc::Bf16> h1_16, att16, shared_x16;
    kc::Buffer<int32_t> idx;
    kc::Buffer<uint32_t> counts;
    kc::Buffer<double> f;  // each expert's share of the global assignments (the balancing loss)
    double global_tokens = 0;  // this layer's global batch, as global_stats said
  };

  // The QK-norm's two parts of a fused row: the queries [0, D) and the keys [D, D + KV), each with
  // its gain and what the forward keeps (the raw values, their rstd).
  struct QkPart {
    int off, width;
    Slice gain;
    float *raw, *rstd;
  };
  std::array<QkPart, 2> qk_parts(int l);

  Status reserve(int B, int T);
  Status forward(const std::vector<int32_t>& inputs, int B, int T, DeviceExchange& ex, StepStats& stats);
  Status forward_layer(int l, int B, int T, DeviceExchange& ex, StepStats& stats);
  Status attention_forward(int l, int B, int T);
  Status qk_norm_forward(int l, int N);
  Status route(int l, int N, DeviceExchange& ex, StepStats& stats);
  Status shared_forward(int l, int N, float* next);
  Status head_forward(int N);
  Status backward(int B, int T, DeviceExchange& ex);
  Status head_backward(int N);
  Status backward_layer(int l, int B, int T, DeviceExchange& ex);
  Status shared_backward(int l, int N);
  Status router_backward(int l, int N);
  Status attention_backward(int l, int B, int T);
  Status qk_norm_backward(int l, int N);
  DeviceRouting routing(int l, int N) const;

  const kc::Context& ctx_;
  DeviceParams& p_;
  std::vector<LayerActs> acts_;
  int64_t global_tokens_ = 0;  // step()'s (the z-loss's normaliser)
  double aux_share_ = 1.0;     // step()'s Batch::aux_share: the balancing loss's weight (a group's shard type)

  // Final stream, LM head, loss.
  DeviceTokens tokens_;
  kc::Buffer<float> x_final_, xf_, rstdf_, logits_, probs_;
  kc::Buffer<kc::Bf16> xf16_, dlogits16_;  // bf16 head only
  kc::Buffer<double> prob_sums_;
  // Scratch shared by the layers (contents dead between uses).
  kc::Buffer<float> h1_, att_, moe_out_, normalised_, dscores_, dz_, dw_, cols_, cols2_, zg_, dzg_, dshared_;
  kc::Buffer<float> dres_, dxmid_, datt_, dqkv_, dfull_, dh1_, dh2_, dmoe_, dxf_, rms_scratch_;
  kc::Buffer<kc::Bf16> grad16_;
  kc::Buffer<char> att_scratch_, shared_scratch_;
  std::vector<uint32_t> counts_host_;
  std::vector<double> prob_sums_host_;
  std::vector<float> lse_host_;
};

}  // namespace sal::model
