// loss.h — softmax cross-entropy over the vocabulary. Rows whose target is negative are ignored
// (padding, or tokens another worker scores): they add nothing to the loss and get zero gradient.
#pragma once

#include <cstdint>

namespace sal::kernels::cpu {

// probs = softmax(logits) [M, V] (every row, ignored ones too); returns sum over kept rows of
// -log p[target], formed per row as max + log(sum exp) - logit[target] and summed in double in a
// fixed order. A target >= V stops the process (a data bug).
double cross_entropy_forward(const float* logits, const int32_t* targets, float* probs, int M, int V);

// dlogits = scale * (probs - onehot(target))  (overwrites; zero rows for ignored targets)
void cross_entropy_backward(const float* probs, const int32_t* targets, float* dlogits, int M, int V,
                            float scale);

}  // namespace sal::kernels::cpu
