// gemm_lt.h — matrix products whose epilogue (bias, GELU, GELU's derivative) runs inside the GEMM
// kernel (cuBLASLt), so the product's output is written once instead of being read back by a
// separate pass. The same row-major conventions and argument meanings as gemm.h: A is [M,K] ([K,M]
// if transA), B is [K,N] ([N,K] if transB), C [M,N] with row stride ldc; bf16 operands, fp32
// accumulation; C is overwritten (beta 0). GELU is the tanh approximation of kernels/cpu/activation.h
// (cuBLASLt's GELU epilogues use the same one).
//
//   gemm_lt_gelu_aux_bias   pre = op(A) op(B) + bias (bias [N] bf16: cuBLASLt wants a bias of
//                           C's type when C is bf16); aux = bf16(pre) [M,N] (row
//                           stride ldaux); C = bf16(gelu(pre))          — an MLP's up-projection
//   gemm_lt_dgelu           C = bf16(op(A) op(B) * gelu'(aux)), aux as the forward wrote it
//                                                                        — its gradient
//   gemm_lt_bias_f32        C = op(A) op(B) + bias (bias [N] fp32), fp32 C — the down-projection
//
// Requirements (cuBLASLt's): ldc and ldaux multiples of 8, C, aux and the operands 16-byte aligned.
// M, N or K == 0 is refused (an epilogue needs a product). The algorithm is chosen per shape by
// cuBLASLt's heuristic (which caches its answers) with the Context's workspace.
#pragma once

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// The product part of a call: op(A) [M,K] times op(B) [K,N].
struct LtProduct {
  bool transA = false, transB = false;
  int M = 0, N = 0, K = 0;
  const Bf16* A = nullptr;
  int lda = 0;
  const Bf16* B = nullptr;
  int ldb = 0;
};

Status gemm_lt_gelu_aux_bias(const Context& ctx, const LtProduct& p, const Bf16* bias, Bf16* aux, int ldaux, Bf16* C,
                             int ldc);

Status gemm_lt_dgelu(const Context& ctx, const LtProduct& p, const Bf16* aux, int ldaux, Bf16* C, int ldc);

Status gemm_lt_bias_f32(const Context& ctx, const LtProduct& p, const float* bias, float* C, int ldc);

}  // namespace sal::kernels::cuda
