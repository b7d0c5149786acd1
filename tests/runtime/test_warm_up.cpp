// test_warm_up.cpp — a new worker's warm-up (runtime/warm_up.h), in this process (its data plane
// a one-rank Gloo context): it faults in the heap it estimates, block by block, and the heap keeps
// it (a step's allocations after it fault in almost nothing); it runs its whole pass (every
// layer's forward and backward), checks between blocks, layers and experts whether to stop and
// stops at the first boundary after it should, makes no pass without a share, keeps to the micro-batch, and
// works on both model families with fewer experts than top_k asked for.
#include <doctest/doctest.h>

#include "runtime/warm_up.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/heap.h"

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

// The warm-up model's dims (the job's, with warm_up_experts experts a layer, at least top_k).
model::Dims warm_dims(const TrainSpec& s) {
  model::Dims d = s.dims;
  d.experts = std::max(s.warm_up_experts, d.top_k);
  return d;
}

// The heap blocks a warm-up of `s` faults in before its pass.
int heap_blocks(const TrainSpec& s) {
  return int((heap_reserve_bytes(warm_dims(s), s.warm_up_sequences) + kHeapBlock - 1) / kHeapBlock);
}

long minor_faults() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}

}  // namespace

TEST_CASE("warm-up: the heap estimate counts the units and what a step keeps for its backward") {
  model::Dims d;  // drill8's warm-up model: 16 sequences of 64 tokens, 4 experts a layer
  d.layers = 2, d.d = 64, d.heads = 4, d.experts = 4, d.top_k = 2, d.seq_len = 64, d.vocab = 256;
  const size_t drill8 = heap_reserve_bytes(d, 16);
  CHECK(drill8 >= size_t(24) << 20);
  CHECK(drill8 <= size_t(32) << 20);
  CHECK(heap_reserve_bytes(d, 32) > drill8);
  const size_t units_only = heap_reserve_bytes(d, 0);  // weights, gradient and moments: 16 bytes a parameter
  size_t params = 0;
  for (const UnitId& id : model_units(d)) params += unit_size(d, id.kind);
  CHECK(units_only == 16 * params);
  model::Dims deeper = d;
  deeper.layers = 4;
  CHECK(heap_reserve_bytes(deeper, 16) > drill8);
}

TEST_CASE("warm-up: the heap it faults in stays in the process, and a step's blocks then fault in almost nothing") {
  keep_large_blocks();  // as in a worker (and for the rest of this process)
  TrainSpec s = spec();
  s.dims.d = 64, s.dims.heads = 4, s.dims.seq_len = 64, s.dims.vocab = 256;
  s.warm_up_sequences = 16;
  const int blocks = heap_blocks(s);
  REQUIRE(blocks >= 8);
  Stopper stop{blocks + 1};  // says stop right after the last block: no pass
  auto done = warm_up(s, corpus(), stop.fn());
  REQUIRE(done);
  CHECK_FALSE(done->finished);
  CHECK(done->heap_bytes == size_t(blocks) * kHeapBlock);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const long before = minor_faults();
  std::vector<void*> taken;
  for (int i = 0; i < blocks - 1; ++i) {
    taken.push_back(std::malloc(kHeapBlock));
    auto* p = static_cast<volatile char*>(taken.back());
    for (size_t k = 0; k < kHeapBlock; k += page) p[k] = 1;
  }
  const long faults = minor_faults() - before;
  for (void* p : taken) std::free(p);
  CHECK(faults < long(blocks) * long(kHeapBlock / page) / 10);  // a fresh heap: one a page
}

TEST_CASE("warm-up: the whole pass on the worker's share, asked before each layer's pass and expert's block") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    int calls = 0;
    auto done = warm_up(spec(llama), corpus(), [&] { return ++calls, false; });
    REQUIRE(done);
    CHECK(done->finished);
    CHECK(done->sequences == 4);
    CHECK(done->ms > 0);
    const int blocks = heap_blocks(spec(llama));
    CHECK(done->heap_bytes == size_t(blocks) * kHeapBlock);
    // before each heap block and after the last, then each of 2 layers forward and backward, and
    // each of its 3 experts with rows (at least top_k = 2 of them) both ways
    CHECK(calls >= blocks + 1 + 2 * 2 + 2 * 2 * 2);
    CHECK(calls <= blocks + 1 + 2 * 2 + 2 * 2 * 3);
  }
}

TEST_CASE("warm-up: stops at the first block, layer or expert boundary after it is told to, without an error") {
  const int blocks = heap_blocks(spec());
  for (int from : {1, 2, blocks + 1, blocks + 2, blocks + 3, blocks + 5, blocks + 9}) {
    CAPTURE(from);
    Stopper s{from};
    auto done = warm_up(spec(), corpus(), s.fn());
    REQUIRE(done);
    CHECK_FALSE(done->finished);
    CHECK(s.calls == from);  // nothing ran past the boundary where it said stop
    CHECK(done->heap_bytes == size_t(std::min(from - 1, blocks)) * kHeapBlock);
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
  CHECK(d0->heap_bytes == 0);
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
