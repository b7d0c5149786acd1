// model_configs.h — the moe-gpt shapes the one-process training benchmarks measure (bench_train,
// bench_frozen): quickstart, the default job's model; larger, the d = 256 shapes bench_kernels
// measures.
#pragma once

#include <vector>

#include "model/dims.h"

namespace sal::bench {

struct ModelConfig {
  const char* name;
  model::Dims dims;
  int batch;
};

inline model::Dims dims_of(int layers, int d, int heads, int experts, int top_k, int seq) {
  model::Dims m;
  m.layers = layers, m.d = d, m.heads = heads, m.experts = experts, m.top_k = top_k, m.seq_len = seq;
  return m;
}

inline const std::vector<ModelConfig>& model_configs() {
  static const std::vector<ModelConfig> all = {
      {"quickstart", dims_of(2, 64, 4, 8, 2, 64), 16},
      {"larger", dims_of(4, 256, 8, 8, 2, 128), 16},
  };
  return all;
}

}  // namespace sal::bench
