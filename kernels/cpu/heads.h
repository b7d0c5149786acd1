// heads.h — grouped-query attention's key/value heads (moe-llama): a fused projection row
// [q (D) | k (KV) | v (KV)] with fewer key/value heads than query heads is widened to the
// [q | k | v] row of 3D columns the attention kernel takes, each key/value head repeated for its
// group of D / KV query heads (query head h reads key/value head h / group); the backward sums the
// repeats' gradients back into their head. hd is the head size; KV divides D.
#pragma once

namespace sal::kernels::cpu {

// qkv [N, D + 2KV] -> full [N, 3D] (overwritten).
void expand_kv_heads(const float* qkv, float* full, int N, int D, int KV, int hd);

// dfull [N, 3D] -> dqkv [N, D + 2KV] (overwritten): the queries' columns copied, each key/value
// head's the sum over its query heads, in head order.
void collapse_kv_heads(const float* dfull, float* dqkv, int N, int D, int KV, int hd);

}  // namespace sal::kernels::cpu
