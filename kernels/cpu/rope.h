// rope.h — rotary position embeddings (moe-llama's positions), in place on the query and key
// columns of a fused [q | k | v] row. Each head of hd columns is rotated in pairs (i, i + hd/2)
// (the "rotate half" convention of Hugging Face's Llama, Mixtral and Qwen code, so imported weights
// need no permutation) by the angle pos * theta^(-2i/hd), pos = row mod T (the token's position in
// its sequence).
#pragma once

namespace sal::kernels::cpu {

// x [rows, ld]: rotates columns [col0, col0 + heads * hd) of every row; rows are sequences of T.
void rope_forward(float* x, int rows, int T, int ld, int col0, int heads, int hd, float theta);

// The inverse rotation: the gradient of rope_forward (a rotation's transpose is its inverse).
void rope_backward(float* dx, int rows, int T, int ld, int col0, int heads, int hd, float theta);

}  // namespace sal::kernels::cpu
