// attention.h — causal multi-head self-attention on the GPU, forward and backward, with exactly the
// layout of kernels/cpu/attention.h:
//   qkv [B*T, 3C] as [q | k | v] per row, each split into H heads of hs = C/H columns;
//   for each (b, h): S = q k^T / sqrt(hs), masked causally (key j <= query t), P = softmax(S) by
//   row, out = P v into columns [h*hs, (h+1)*hs) of out [B*T, C];
//   probs [B, H, T, T] keeps P for the backward, upper triangle zero; dqkv [B*T, 3C] overwritten.
//
// Implementation: q, k, v (and dout) are packed per head into contiguous bf16 blocks [B*H, T, hs],
// the products are strided-batched cuBLAS GEMMs over the B*H heads (bf16 operands, fp32
// accumulation and fp32 results), the causal softmax and its gradient are our own row kernels in
// fp32. The full T x T scores are computed, the masked half included (simple rather than fast).
// Precision: bf16 operands (q, k, v, dout, P and dS are rounded to bf16 for the products), so the
// results agree with the CPU's to ~1e-2 relative, not fp32's 1e-5; probs is fp32 throughout after
// the score product.
//
// Scratch: the caller provides attention_scratch_bytes(B, T, C, H) bytes, used by forward and
// backward alike (contents dead between calls), 16-byte aligned (cudaMalloc's are). With N = B*T*C
// and P = B*H*T*T it is about 20 N + 8 P bytes: four bf16 [N] head blocks, three fp32 [N] ones,
// one fp32 and two bf16 [P] score blocks.
#pragma once

#include <cstddef>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

size_t attention_scratch_bytes(int B, int T, int C, int H);

// qkv [B*T, 3C] -> out [B*T, C], probs [B, H, T, T] (both overwritten).
Status attention_forward(const Context& ctx, const float* qkv, float* out, float* probs, int B, int T, int C, int H,
                         void* scratch, size_t scratch_bytes);

// dout [B*T, C], with the forward's qkv and probs -> dqkv [B*T, 3C] (overwritten, every element).
Status attention_backward(const Context& ctx, const float* dout, const float* qkv, const float* probs, float* dqkv,
                          int B, int T, int C, int H, void* scratch, size_t scratch_bytes);

}  // namespace sal::kernels::cuda
