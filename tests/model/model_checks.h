// model_checks.h — what the model tests of both families share: a corpus with a learnable pattern,
// the whole loss of one forward and backward (cross-entropy summed, so float finite differences
// see it), and a tiny model trained on the pattern.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <utility>

#include "model/local_exchange.h"
#include "model/model.h"
#include "model/optimizer.h"

namespace sal::model::test {

inline Corpus pattern_corpus(int vocab, size_t n) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = uint32_t((i * 7 + i / 3) % size_t(vocab));
  return Corpus::from_tokens(std::move(t), "pattern");
}

// One step's loss with the cross-entropy summed (not averaged), the balancing loss and the router
// z-loss; the gradients are left in p.
inline double whole_loss(Params& p, const Batch& b, StepStats* stats = nullptr) {
  LocalExchange ex(p);
  auto m = make_model(p);
  p.zero_grads();
  auto s = m->step(b, 1, ex);
  REQUIRE(s.ok());
  if (stats) *stats = *s;
  return s->ce_sum + s->aux + s->z_sum;
}

// 60 steps of batches of 8 from the pattern (AdamW, lr 1e-2 after 5 warm-up steps, and a routing
// bias's balancing step where the model has one): the mean cross-entropy of the first step and of
// the last. `each` (if given) sees every step's stats.
inline std::pair<double, double> train_on_pattern(Params& p, const std::function<void(const StepStats&)>& each = {}) {
  const Dims& d = p.dims;
  Corpus c = pattern_corpus(d.vocab, 400);
  OptimConfig oc;
  oc.lr = 1e-2, oc.warmup = 5, oc.total_steps = 60;
  auto m = make_model(p);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Batch b = make_batch(c, 2, uint64_t(step), 0, 8, d.seq_len);
    LocalExchange ex(p);
    p.zero_grads();
    auto s = m->step(b, 8 * d.seq_len, ex);
    REQUIRE(s.ok());
    last = s->ce_sum / (8.0 * d.seq_len);
    if (step == 0) first = last;
    double norm2 = 0;
    for (Unit* u : p.units()) norm2 += grad_sum_squares(*u);
    apply_adamw(p, oc, learning_rate(oc, step), clip_scale(oc, std::sqrt(norm2)), step + 1);
    REQUIRE(update_router_bias(p, s->router_load).ok());
    if (each) each(*s);
  }
  return {first, last};
}

}  // namespace sal::model::test
