// heads.h — grouped-query attention's key/value heads on the GPU, the operators of
// kernels/cpu/heads.h on device pointers: a fused row [q (D) | k (KV) | v (KV)] widened to the
// attention kernel's [q | k | v] of 3D columns (each key/value head repeated for its D / KV query
// heads), and back, the repeats' gradients summed over the query heads in order from +0 — the
// CPU's bits exactly.
#pragma once

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// qkv [N, D + 2KV] -> full [N, 3D] (overwritten; no overlap). Needs hd > 0, KV a multiple of hd
// dividing D.
Status expand_kv_heads(const Context& ctx, const float* qkv, float* full, int N, int D, int KV, int hd);

// dfull [N, 3D] -> dqkv [N, D + 2KV] (overwritten; no overlap).
Status collapse_kv_heads(const Context& ctx, const float* dfull, float* dqkv, int N, int D, int KV, int hd);

}  // namespace sal::kernels::cuda
