// loss.h — softmax cross-entropy over the vocabulary on the GPU, the same operator as
// kernels/cpu/loss.h on device pointers. Rows whose target is negative are ignored (padding, or
// tokens another worker scores): they add nothing to the loss and get zero gradient.
//
// The loss is a device double so the step needs no host round trip: each row's
// max + log(sum exp) - logit[target] is formed in double into a caller-given scratch row, then one
// block adds the rows in the CPU's order (chunks of 32 rows in order, the chunks in order). Same
// bits every run. A target >= V is a data bug the CPU stops on; here it is counted into a device
// int the caller reads after synchronising (nonzero: treat as the CPU treats it), and such a row
// counts as ignored (no loss, zero gradient, nothing read or written out of bounds).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/context.h"

namespace sal::kernels::cuda {

// Doubles of scratch cross_entropy_forward needs for M rows: M.
size_t cross_entropy_scratch_doubles(int M);

// probs = softmax(logits) [M, V] (every row, ignored ones too); *loss_out (one device double,
// overwritten) = sum over kept rows of -log p[target]; *bad_targets (one device int32,
// overwritten) = number of targets >= V. scratch: cross_entropy_scratch_doubles(M) doubles of
// device memory, used only in this call's stream order. Any V works (one block per row).
Status cross_entropy_forward(const Context& ctx, const float* logits, const int32_t* targets, float* probs, int M,
                             int V, double* loss_out, int32_t* bad_targets, double* scratch);

// dlogits = scale * (probs - onehot(target))  (overwrites; zero rows for targets < 0 or >= V).
Status cross_entropy_backward(const Context& ctx, const float* probs, const int32_t* targets, float* dlogits,
                              int M, int V, float scale);

}  // namespace sal::kernels::cuda
