// test_warm_up.cpp — a new worker's warm-up pass (runtime/warm_up.h), in this process (its data
// plane a one-rank Gloo context): it runs its whole pass (every layer's forward and backward),
// checks between layers whether to stop and stops at the first boundary after it should, makes
// no pass without a share, keeps to the micro-batch, and works on both model families with
// fewer experts than top_k asked for.
#include <doctest/doctest.h>

#include "runtime/warm_up.h"

using namespace sal;
using namespace sal::runtime;

namespace {

TrainSpec spec(bool llama = false) {
  TrainSpec s;
  model::Dims& d = s.dims;
  d.layers = 2, d.d = 16, d.heads = 2, d.experts = 8, d.top_k = 2, d.seq_len = 8, d.vocab = 64;
  if (llama) {
    d.family = ModelFamily::llama;
    d.kv_dim = 8, d.expert_ffn = 12, d.shared_ffn = 12, d.sigmoid_router = true, d.norm_topk = true;
  }
  s.optim.lr = 1e-2, s.optim.warmup = 2, s.optim.total_steps = 10;
  s.warm_up_sequences = 4;
  s.warm_up_experts = 3;
  return s;
}

model::Corpus corpus() {
  std::vector<uint32_t> t;
  for (uint32_t i = 0; i < 2000; ++i) t.push_back((i * 37 + i / 7) % 64);
  return model::Corpus::from_tokens(std::move(t), "test");
}

// A stop predicate that says "stop" from its `from`-th call on (0: never), counting its calls.
struct Stopper {
  int from = 0;
  int calls = 0;
  std::function<bool()> fn() {
    return [this] { return from > 0 && ++calls >= from; };
  }
};

}  // namespace

TEST_CASE("warm-up: the whole pass on the worker's share, asked before each layer's forward and backward") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    int calls = 0;
    auto done = warm_up(spec(llama), corpus(), [&] { return ++calls, false; });
    REQUIRE(done);
    CHECK(done->finished);
    CHECK(done->sequences == 4);
    CHECK(done->ms > 0);
    CHECK(calls == 1 + 2 * 2);  // before the pass, then each of 2 layers forward and backward
  }
}

TEST_CASE("warm-up: stops at the first layer boundary after it is told to, without an error") {
  for (int from : {1, 2, 3, 5}) {
    CAPTURE(from);
    Stopper s{from};
    auto done = warm_up(spec(), corpus(), s.fn());
    REQUIRE(done);
    CHECK_FALSE(done->finished);
    CHECK(s.calls == from);  // nothing ran past the boundary where it said stop
  }
}

TEST_CASE("warm-up: no pass without a share, the micro-batch bounds it, top_k bounds the experts from below") {
  TrainSpec none = spec();
  none.warm_up_sequences = 0;
  int calls = 0;
  auto d0 = warm_up(none, corpus(), [&] { return ++calls, false; });
  REQUIRE(d0);
  CHECK_FALSE(d0->finished);
  CHECK(d0->ms == 0);
  CHECK(calls == 0);

  TrainSpec micro = spec();
  micro.micro_batch = 2;
  auto d1 = warm_up(micro, corpus(), [] { return false; });
  REQUIRE(d1);
  CHECK(d1->finished);
  CHECK(d1->sequences == 2);

  TrainSpec few = spec();
  few.warm_up_experts = 1;  // fewer than top_k: the pass's model has top_k experts a layer
  auto d2 = warm_up(few, corpus(), [] { return false; });
  REQUIRE(d2);
  CHECK(d2->finished);
}
