// device_exchange.h — how the GPU model reaches its experts: the device analogue of
// model::ExpertExchange (exchange.h). The model routes each local token to k experts; a
// DeviceExchange brings back the gate-weighted sum of those experts' outputs, and in the backward
// pass the input gradients and the combine weights' gradients, accumulating the experts' weight
// gradients wherever the experts live. Everything is on device memory and enqueued on the
// Context's stream; what the host must know (row counts) is copied down inside.
//
// LocalDeviceExchange holds every routed expert on this GPU (one worker; tests, sampling, the
// single-GPU benchmark). Its forward is the one-rank case of the distributed flow in
// kernels/cuda/permute.h: count -> flexible_dispatch (W = 1: every expert's tokens stay here; an
// expert with tokens but not held is an error, as in model::LocalExchange) -> permute_rows ->
// permute -> experts_forward (device_experts.h) -> unpermute_combine. With one worker the send
// buffer is expert by expert, each expert's rows in slot order, which is exactly the contiguous
// per-expert layout the expert GEMMs take.
//
// A distributed (NCCL) exchange fits the same interface: forward all-gathers r.counts (this
// worker's column; transpose the gathered [W][E] into dispatch.h's [E][W]), computes the schedule
// with flexible_dispatch, packs with permute_rows/permute, runs the all-to-all-v, runs its held
// experts and sends the outputs back to be combined with unpermute_combine. One difference: rows
// arrive source-major then expert, so an expert's rows are one segment per source; they need
// regrouping into one block per expert before experts_forward (and the inverse after), which
// LocalDeviceExchange never needs.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/cuda/grouped_gemm.h"
#include "model/cuda/device_params.h"

namespace sal::model {

// One MoE layer's routing of the local tokens, on the device: token t goes to experts
// idx[t*k + j] with combine weights w[t*k + j], j < k; counts[e] is the number of assignments to
// expert e (kernels/cuda/permute.h's count_assignments of idx): this worker's column of the
// dispatch's token counts.
struct DeviceRouting {
  int tokens = 0;
  int k = 0;
  const int32_t* idx = nullptr;     // [tokens * k]
  const float* w = nullptr;         // [tokens * k]
  const uint32_t* counts = nullptr;  // [experts]
};

class DeviceExchange {
 public:
  virtual ~DeviceExchange() = default;

  // Sums over every worker, in place, as model::ExpertExchange::global_stats: per-expert
  // assignment counts and gate-probability sums, and the token count (host values).
  virtual Status global_stats(int layer, std::vector<double>& counts, std::vector<double>& prob_sums,
                              double& tokens) = 0;

  // out [tokens, d] (overwritten) = sum over j = 0..k-1 in order of w[t*k + j] * expert
  // idx[t*k + j] applied to x[t]; x [tokens, d]. Keeps what the backward of `layer` needs; the
  // routing's memory must stay unchanged until that backward.
  virtual Status forward(int layer, const DeviceRouting& r, const float* x, float* out) = 0;

  // d_out [tokens, d], the gradient of forward's out -> dx [tokens, d] (overwritten: the sum over the
  // token's assignments of the experts' input gradients) and d_w [tokens * k] (overwritten:
  // dot(d_out[t], output of expert idx[t*k + j] on x[t])); accumulates the experts' weight
  // gradients where they live. r is the forward's routing of this layer.
  virtual Status backward(int layer, const DeviceRouting& r, const float* d_out, float* dx, float* d_w) = 0;
};

class LocalDeviceExchange : public DeviceExchange {
 public:
  // Runs on p's Context. `mode` says how the expert GEMMs are issued (grouped_gemm.h; the GPU
  // backend picks it, SAL_EXPERT_GEMM): grouped and fused apply when d % 8 == 0 (their alignment
  // rule), per expert otherwise. p must outlive the exchange.
  explicit LocalDeviceExchange(DeviceParams& p, kc::GroupedGemmMode mode = kc::GroupedGemmMode::per_group);

  Status global_stats(int, std::vector<double>&, std::vector<double>&, double&) override { return {}; }
  Status forward(int layer, const DeviceRouting& r, const float* x, float* out) override;
  Status backward(int layer, const DeviceRouting& r, const float* d_out, float* dx, float* d_w) override;

  kc::GroupedGemmMode mode() const { return mode_; }

 private:
  // What one layer's backward needs from its forward.
  struct Saved {
    int tokens = -1, k = 0;
    std::vector<int> rows;           // host: rows of each expert (all E of them), in expert order
    kc::Buffer<int32_t> slot_rows;   // [tokens*k] each assignment's row (permute_rows)
    kc::Buffer<float> y;             // [tokens*k, d] expert outputs, row layout
    kc::Buffer<kc::Bf16> x16;        // [tokens*k, d] expert inputs (bf16), for dW1
    kc::Buffer<float> h;             // [tokens*k, expert_hidden_floats] pre-activations
  };

  Status check_routing(const char* fn, const DeviceRouting& r) const;
  // mode_ where d allows it (the grouped and fused paths need d % 8 == 0), else per expert.
  kc::GroupedGemmMode gemm_mode() const;

  const kc::Context& ctx_;
  DeviceParams& p_;
  kc::GroupedGemmMode mode_;
  std::map<int, Saved> saved_;
  // Scratch shared by the layers (dead between calls).
  kc::Buffer<uint32_t> units_, send_, quota_;
  kc::Buffer<int32_t> bad_expert_;
  kc::Buffer<char> permute_ws_, mlp_scratch_;
  kc::Buffer<float> xperm_, d_rows_, dx_rows_;
  std::vector<uint32_t> units_host_, quota_host_;
};

}  // namespace sal::model
