// dims.h — the shape of a moe-gpt model (from the job file's `model` section) and of a training
// batch: everything the model, the data loader and the runtime agree on.
#pragma once

#include <cstdint>

namespace sal::model {

struct Dims {
  int layers = 2;
  int d = 64;          // d_model
  int heads = 4;
  int experts = 8;
  int top_k = 2;
  int seq_len = 64;    // T: tokens per sequence
  int vocab = 256;
  float aux_weight = 0.01f;  // Switch load-balancing loss weight
  // Forced routing for experiments: each token's k experts are drawn (deterministically) with the
  // first `hot_experts` experts `skew` times as likely as the others, instead of the gate's top-k.
  // 1 = off (the gate routes).
  float skew = 1.0f;
  int hot_experts = 0;

  int ffn() const { return 4 * d; }  // each expert: d -> 4d -> d
};

}  // namespace sal::model
