// model_configs.h — the model shapes the one-process training benchmarks measure (bench_train,
// bench_frozen): quickstart, the default job's model; larger, the d = 256 shapes bench_kernels
// measures; llama, scripts/jobs/llama.lua's moe-llama model (grouped-query attention, 16 SwiGLU
// experts of width 128 with top-4 and a shared one, sigmoid router, renormalised top-k, untied head).
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

inline model::Dims llama_dims() {
  model::Dims m = dims_of(4, 128, 8, 16, 4, 128);
  m.family = ModelFamily::llama;
  m.kv_dim = 32, m.expert_ffn = 128, m.shared_ffn = 128, m.tied_head = false;
  m.sigmoid_router = true, m.norm_topk = true, m.z_loss_weight = 0.001f;
  return m;
}

inline const std::vector<ModelConfig>& model_configs() {
  static const std::vector<ModelConfig> all = {
      {"quickstart", dims_of(2, 64, 4, 8, 2, 64), 16},
      {"larger", dims_of(4, 256, 8, 8, 2, 128), 16},
      {"llama", llama_dims(), 16},
  };
  return all;
}

}  // namespace sal::bench
