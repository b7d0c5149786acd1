// attention.h — causal multi-head self-attention, forward and backward.
//
// qkv is [B*T, 3C] laid out as [q | k | v] per row; each of q, k, v splits its C columns into H
// heads of hs = C/H. For each (b, h): S = q k^T / sqrt(hs) masked causally (key j <= query t),
// P = softmax(S) row by row, out = P v, written to columns [h*hs, (h+1)*hs) of out [B*T, C].
// probs [B, H, T, T] keeps P for the backward pass, upper triangle zero.
//
// Each (b, h) is one pool task, its products OpenBLAS GEMMs over row blocks of kCausalBlock queries
// that stop at the block's last key, so the masked half of S is mostly never computed.
#pragma once

namespace sal::kernels::cpu {

// Query rows per block of the causal GEMMs: blocks of 64 skip ~25% of S at T = 128 and approach
// the ideal 50% as T grows, while keeping each GEMM large enough for OpenBLAS's kernels.
constexpr int kCausalBlock = 64;

void attention_forward(const float* qkv, float* out, float* probs, int B, int T, int C, int H);

// dqkv overwritten (every element: q, k and v parts).
void attention_backward(const float* dout, const float* qkv, const float* probs, float* dqkv, int B, int T,
                        int C, int H);

}  // namespace sal::kernels::cpu
