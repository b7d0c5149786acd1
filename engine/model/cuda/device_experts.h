// device_experts.h — one layer's held experts on the device, whichever the model family: moe-gpt's
// GELU MLPs with biases (kernels/cuda/grouped_gemm.h, in the exchange's GEMM mode) or moe-llama's
// SwiGLU MLPs (kernels/cuda/swiglu_experts.h, one GEMM per expert and product). Rows come grouped
// by expert, rows[e] for each of the layer's E experts (0 for one not held here). Both device
// exchanges (LocalDeviceExchange here, runtime's PlanDeviceExchange) run their experts through
// these, and size what the forward keeps with expert_hidden_floats.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/cuda/grouped_gemm.h"
#include "model/cuda/device_params.h"

namespace sal::model {

// What one layer's forward keeps for its backward: the input rows in bf16 ([R, d]) and the hidden
// pre-activations ([R, expert_hidden_floats(d)]).
struct ExpertRows {
  kc::Bf16* x16 = nullptr;
  float* h = nullptr;
};

// Floats of pre-activations a row keeps: moe-gpt's F = 4d, moe-llama's 2F ([gate | up]).
size_t expert_hidden_floats(const Dims& d);

// Scratch bytes the experts need for R rows.
size_t expert_scratch_bytes(const Dims& d, size_t rows);

// x [R, d] -> out [R, d] (overwritten); fills `saved`. mode: moe-gpt's GEMM mode (moe-llama's run
// per expert whatever it says). rows.size() must be the layer's expert count.
Status experts_forward(DeviceParams& p, int layer, kc::GroupedGemmMode mode, const std::vector<int>& rows,
                       const float* x, float* out, const ExpertRows& saved, void* scratch, size_t scratch_bytes);

// dout [R, d] -> dx [R, d] (overwritten); accumulates the held experts' weight gradients.
Status experts_backward(DeviceParams& p, int layer, kc::GroupedGemmMode mode, const std::vector<int>& rows,
                        const ExpertRows& saved, const float* dout, float* dx, void* scratch, size_t scratch_bytes);

}  // namespace sal::model
