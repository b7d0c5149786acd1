// swiglu_experts.h — the SwiGLU expert MLPs of one moe-llama MoE layer on one worker (model/expert.h's
// swiglu_mlp_forward / swiglu_mlp_backward on the GPU). As grouped_gemm.h, the worker's G local
// experts get their token rows in one buffer, expert g's m_g rows contiguous and in order (rows: a
// host array of the G counts). Expert g computes on its rows:
//   h = x W13_g (saved, [m, 2F]: gate columns then up columns),  a = silu(gate) * up,
//   out = a W2_g;                                W13 [d, 2F], W2 [F, d] row-major, no biases;
// and backward
//   da = dout W2^T,  dh = swiglu'(h) da,  dx = dh W13^T (overwritten),
//   dW13 += x^T dh,  dW2 += a^T dout  (fp32, accumulate; a recomputed from h, as the CPU does).
// Experts with m_g == 0 are skipped (no product, their gradients untouched); a null gradient
// pointer (a frozen expert) skips that expert's weight gradients, the input gradient still flows.
//
// Precision as grouped_gemm.h's per_group mode: one cublasGemmEx per expert and product, bf16
// operands (x, a, dout and dh rounded once, over all R rows together) with fp32 accumulation and
// fp32 results; the elementwise SwiGLU and its derivative in fp32 (activation.h).
//
// Memory the caller provides (R = sum of m_g):
//   saved    x16 [R, d] bf16 and h [R, 2F] fp32, written by the forward, read by the backward;
//   scratch  swiglu_experts_scratch_bytes(R, d, F) bytes, used by forward and backward alike.
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

struct SwigluExpertParams {
  const Bf16* w13 = nullptr;  // [d, 2F]
  const Bf16* w2 = nullptr;   // [F, d]
};

struct SwigluExpertGrads {
  float* w13 = nullptr;  // [d, 2F]; null: no weight gradient for this expert
  float* w2 = nullptr;   // [F, d]
};

struct SwigluSaved {
  Bf16* x16 = nullptr;  // [R, d]
  float* h = nullptr;   // [R, 2F]
};

size_t swiglu_experts_scratch_bytes(int total_rows, int d, int F);

// x [R, d] fp32 -> out [R, d] fp32 (overwritten); fills saved. rows and experts: host arrays of G.
Status swiglu_experts_forward(const Context& ctx, int G, const int* rows, int d, int F,
                              const SwigluExpertParams* experts, const float* x, float* out, const SwigluSaved& saved,
                              void* scratch, size_t scratch_bytes);

// dout [R, d] -> dx [R, d] (overwritten; dx may not alias dout); grads: host array of G (accumulated).
Status swiglu_experts_backward(const Context& ctx, int G, const int* rows, int d, int F,
                               const SwigluExpertParams* experts, const SwigluSaved& saved, const float* dout,
                               float* dx, const SwigluExpertGrads* grads, void* scratch, size_t scratch_bytes);

}  // namespace sal::kernels::cuda
