// embedding.h — token + learned position embeddings on the GPU, the same operator as
// kernels/cpu/embedding.h on device pointers: out[b*T+t, :] = tok[ids[b*T+t], :] + pos[t, :].
//
// Ids outside [0, V) are a data bug. The CPU stops the process; a GPU kernel cannot, and must not
// read or write outside the table (an illegal address poisons the whole CUDA context). So the
// forward pass counts them into a device int `bad_ids` (overwritten: 0 when every id is valid) and
// writes pos alone for their rows; the caller reads the count after the stream is synchronised
// (the training step does so anyway for the loss) and treats nonzero as the CPU treats a bad id.
// The backward pass takes V too and skips such rows.
//
// The backward pass is deterministic without float atomics: every table row is summed by one
// block, over the batch rows in order b*T+t, so dtok and dpos come out bit for bit as the CPU's.
#pragma once

#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// ids [B*T] int32, tok [V, C], pos [>= T, C] or null (no position table: moe-llama's rotary
// positions live in the attention), out [B*T, C]; bad_ids: one device int32, set to the number of
// ids outside [0, V).
Status embedding_forward(const Context& ctx, const int32_t* ids, const float* tok, const float* pos, float* out,
                         int B, int T, int C, int V, int32_t* bad_ids);

// dtok[ids[b*T+t], :] += dout[b*T+t, :]; dpos[t, :] += sum_b dout[b*T+t, :] (both accumulate, rows
// in order b*T+t). Either may be null (frozen table). Rows whose id is outside [0, V) add nothing.
// The dtok pass compares row ids pairwise, O((B*T)^2) integer compares read from cache (2.7e8 at
// B*T = 16K, estimated at about a millisecond, not yet measured): simple and exact; sort the ids
// first if it ever shows up in a profile.
Status embedding_backward(const Context& ctx, const int32_t* ids, const float* dout, float* dtok, float* dpos,
                          int B, int T, int C, int V);

}  // namespace sal::kernels::cuda
