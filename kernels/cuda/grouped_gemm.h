// grouped_gemm.h — the expert MLPs of one MoE layer on one worker, as grouped GEMMs. The worker's
// G local experts get their token rows in one buffer, expert g's m_g rows contiguous and in order
// (the dispatch schedule gives the counts; the caller passes them as a host array). Expert g
// computes, on its rows, what engine/model/expert.cpp computes on one block:
//   h = x W1_g + b1_g (saved),  out = gelu(h) W2_g + b2_g,   W1 [d,4d], W2 [4d,d] row-major,
// gelu the tanh approximation of kernels/cpu/activation.h; and backward
//   dx = (gelu'(h) * (dout W2^T)) W1^T (overwritten);  dW1 += x^T dh, db1 += colsum(dh),
//   dW2 += gelu(h)^T dout, db2 += colsum(dout)  (fp32, accumulate).
// Experts with m_g == 0 are skipped: no product, their gradients untouched.
//
// Precision: GEMM operands are bf16 (x is rounded once by the forward; the weights are bf16 copies
// of the fp32 masters, which the CALLER makes, e.g. convert.h's to_bf16 once per optimizer step),
// accumulation is fp32. The activation products (x W1, a W2, dout W2^T, dh W1^T) write bf16, as
// cublasGemmGroupedBatchedEx offers bf16 operands only with a bf16 C; fp32 epilogues follow (bias,
// GELU, its derivative, widening). Both modes below use the same bf16 outputs, so they compute the
// same numbers up to cuBLAS's kernel choice. The weight gradients are per-expert cublasGemmEx calls
// with an fp32 C accumulating in place (beta = 1) in both modes: the grouped API cannot write fp32
// from bf16, and a bf16 C would round each step's gradient before it reaches the fp32 sum. Bias
// gradients are deterministic column sums (no atomics).
//
// Memory the caller provides (R = sum of m_g, F = 4d):
//   ExpertSaved  x [R,d] bf16 and h [R,F] fp32, written by the forward and read by the backward;
//   scratch      expert_mlp_scratch_bytes(R, d) bytes, used by forward and backward alike (its
//                contents are dead between calls).
// Grouped mode needs d % 8 == 0 and 16-byte-aligned saved.x, scratch and bf16 weights (cudaMalloc's
// are; so is w2 inside one bf16 copy of an expert unit laid out as params.h's [w1|b1|w2|b2]): then
// every per-expert operand pointer is 16-byte aligned, as the grouped API wants of bf16 operands.
// It returns invalid_argument otherwise; per_group mode has no such requirement. Fused mode has
// grouped mode's requirements, and saved.h 16-byte aligned.
//
// Fused mode (cuBLASLt epilogues, gemm_lt.h): the bias and GELU of the up-projection run inside its
// GEMM, which also writes the pre-activations — as bf16, into the first half of saved.h's storage
// (the backward reads them there; saved.h is then not fp32 h, and its second half holds b1 in bf16
// during the forward: cuBLASLt adds a bias of its output's type) — the down-projection adds b2 and
// writes the fp32 output itself, the backward's dout W2^T applies gelu'(h) inside the GEMM, and
// dh W1^T writes fp32 dx itself. That removes three passes over the [R,4d] rows and halves the
// saved pre-activations' traffic; GELU's derivative then sees bf16 pre-activations (one more
// bf16 rounding: test_gemm bounds the difference to the CPU reference as for the other modes).
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// How the activation products of the G experts are issued.
enum class GroupedGemmMode {
  grouped,    // one cublasGemmGroupedBatchedEx per product (per 32 non-empty experts)
  per_group,  // one cublasGemmEx per non-empty expert: the model's default, measured faster on an
              // H200 at every bench_moe_gpu setting (1 200-9 400 rows per expert: the layer's
              // forward + backward 16-27 % faster, performance.md)
  fused,      // per expert, the bias/GELU epilogues fused into the GEMMs (cuBLASLt), see above
};

// One expert's parameters on the device (bf16 weight copies, fp32 biases).
struct ExpertParams {
  const Bf16* w1 = nullptr;   // [d, 4d]
  const float* b1 = nullptr;  // [4d]
  const Bf16* w2 = nullptr;   // [4d, d]
  const float* b2 = nullptr;  // [d]
};

// One expert's fp32 gradients on the device (accumulated into).
struct ExpertGrads {
  float* w1 = nullptr;  // [d, 4d]
  float* b1 = nullptr;  // [4d]
  float* w2 = nullptr;  // [4d, d]
  float* b2 = nullptr;  // [d]
};

// What the forward keeps for the backward.
struct ExpertSaved {
  Bf16* x = nullptr;   // [R, d] the input rows, rounded to bf16
  float* h = nullptr;  // [R, 4d] pre-activations (x W1 + b1); in fused mode bf16, in its first half
};

// Scratch bytes for R rows in all at width d.
size_t expert_mlp_scratch_bytes(int total_rows, int d);

// x [R,d] fp32 -> out [R,d] fp32 (overwritten); fills `saved`. rows: host array of G counts;
// experts: host array of G.
Status expert_mlp_forward(const Context& ctx, GroupedGemmMode mode, int G, const int* rows, int d,
                          const ExpertParams* experts, const float* x, float* out, const ExpertSaved& saved,
                          void* scratch, size_t scratch_bytes);

// dout [R,d] fp32 -> dx [R,d] fp32 (overwritten); accumulates into grads (host array of G).
// `saved` as the forward left it. dx may not alias dout.
Status expert_mlp_backward(const Context& ctx, GroupedGemmMode mode, int G, const int* rows, int d,
                           const ExpertParams* experts, const ExpertSaved& saved, const float* dout, float* dx,
                           const ExpertGrads* grads, void* scratch, size_t scratch_bytes);

// Whether fused mode works with this cuBLASLt on this device: one small forward + backward (two
// experts, d 16) in fused and per_group modes, whose outputs, input gradients and weight gradients
// must agree within bf16 rounding. Ok, or the failed call or the disagreement. Synchronous (it
// waits for the device); a few milliseconds. Callers pick fused mode only when this is ok.
Status check_fused_mode(const Context& ctx);

}  // namespace sal::kernels::cuda
