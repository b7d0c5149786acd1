// embedding.h — token + learned position embeddings: out[b*T+t, :] = tok[ids[b*T+t], :] + pos[t, :].
// ids are checked against the vocabulary size V (an id outside [0, V) stops the process: a data bug).
#pragma once

#include <cstdint>

namespace sal::kernels::cpu {

// tok [V, C], pos [>= T, C], out [B*T, C]. V only bounds the ids.
void embedding_forward(const int32_t* ids, const float* tok, const float* pos, float* out, int B, int T,
                       int C, int V);

// The contract's form, without the vocabulary check (ids must be valid).
void embedding_forward(const int32_t* ids, const float* tok, const float* pos, float* out, int B, int T,
                       int C);

// dtok[ids[b*T+t], :] += dout[b*T+t, :]; dpos[t, :] += sum_b dout[b*T+t, :]  (both accumulate, rows
// in order b*T+t). Either may be null (frozen table).
void embedding_backward(const int32_t* ids, const float* dout, float* dtok, float* dpos, int B, int T, int C);

}  // namespace sal::kernels::cpu
