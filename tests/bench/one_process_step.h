// one_process_step.h — what the one-process training benchmarks share (bench_frozen, bench_sparse):
// the step they time — moe-gpt with every expert local, forward and backward on the batch of step s
// (the global gradient norm returned), then AdamW with the default optimizer clipping with that
// norm — their corpus of random bytes, and their integer options.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "model/data.h"
#include "model/local_exchange.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "model/params.h"

namespace sal::bench {

// Forward and backward; exits the benchmark on an error.
inline double forward_backward(model::Params& p, const model::Corpus& c, int batch, int s) {
  model::Batch b = model::make_batch(c, 1, uint64_t(s), 0, batch, p.dims.seq_len);
  model::LocalExchange ex(p);
  auto m = model::make_model(p);
  p.zero_grads();
  auto st = m->step(b, int64_t(batch) * p.dims.seq_len, ex);
  if (!st) {
    std::fprintf(stderr, "benchmark step %d: %s\n", s, st.error().message().c_str());
    std::exit(1);
  }
  double norm2 = 0;
  for (model::Unit* u : p.units()) norm2 += model::grad_sum_squares(*u);
  return std::sqrt(norm2);
}

inline void update(model::Params& p, double norm, int s) {
  model::OptimConfig oc;
  model::apply_adamw(p, oc, model::learning_rate(oc, s), model::clip_scale(oc, norm), s + 1);
}

// 200 000 random bytes (what a step computes does not depend on the text).
inline model::Corpus random_corpus() {
  std::mt19937 rng(1);
  std::vector<uint32_t> tokens(200000);
  for (auto& t : tokens) t = uint32_t(rng() % 256);
  return model::Corpus::from_tokens(std::move(tokens), "random bytes");
}

// `--name N` (at least 1), else the fallback.
inline int int_arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return std::max(1, std::atoi(argv[i + 1]));
  return fallback;
}

}  // namespace sal::bench
