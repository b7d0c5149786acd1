// test_exchange_stop.cpp — a pass stopped part-way (runtime/distributed_exchange.h's `stopping`, and
// OnHost's abort, runtime/on_host.h), in this process over a one-rank Gloo plane. The exchange asks
// as each layer's forward and backward begin and before each expert's block; a pass told to stop
// fails at that point, naming the layer and where, and computes nothing past it (no expert rows
// after it, no further question asked). A CPU worker's experts compute with no collective between
// them, so without these stop points an aborted step ran on to its next collective. An aborted
// OnHost step stops before its first layer; once the abort is cleared it computes the same step as
// a worker never aborted, bit for bit.
#include <doctest/doctest.h>

#include <gloo/rendezvous/hash_store.h>

#include <string>
#include <vector>

#include "comm/collectives.h"
#include "model/model.h"
#include "runtime/distributed_exchange.h"
#include "runtime/on_host.h"

using namespace sal;
using namespace sal::runtime;

namespace exchange_stop_test {
namespace {

constexpr uint64_t kSeed = 3;
constexpr int kSequences = 4;

model::Dims dims() {
  model::Dims d;
  d.layers = 2, d.d = 16, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 8, d.vocab = 64;
  return d;
}

model::Corpus corpus() {
  std::vector<uint32_t> t;
  for (uint32_t i = 0; i < 2000; ++i) t.push_back((i * 37 + i / 7) % 64);
  return model::Corpus::from_tokens(std::move(t), "test");
}

std::unique_ptr<comm::Collectives> one_rank_plane() {
  gloo::rendezvous::HashStore store;
  comm::GlooOptions o;
  o.prefix = "exchange-stop";
  o.verify_counts = false;
  auto plane = comm::connect_gloo(o, store);
  REQUIRE(plane);
  return std::move(*plane);
}

const std::vector<Counts> kEveryExpertHere(2, Counts(4, {1u}));

struct Pass {
  Status status;
  int asked = 0;  // how often `stopping` was asked
  bool stopped = false;
  int64_t expert_rows = 0;
  double ce_sum = 0;
};

// One step of a fresh model through a DistributedExchange told to stop from its `from`-th question
// on (0: never).
Pass run_pass(comm::Collectives& plane, int from) {
  auto params = model::Params::create(dims(), kSeed, model::Params::all_experts(dims()));
  DistributedExchange ex(plane, params, kEveryExpertHere);
  Pass p;
  ex.stopping = [&] { return ++p.asked, from > 0 && p.asked >= from; };
  const model::Batch b = model::make_batch(corpus(), kSeed, 0, 0, kSequences, dims().seq_len);
  auto st = model::make_model(params)->step(b, int64_t(kSequences) * dims().seq_len, ex);
  p.status = st ? Status{} : Status(st.error());
  p.stopped = ex.stopped();
  p.expert_rows = ex.expert_rows();
  if (st) p.ce_sum = st->ce_sum;
  return p;
}

}  // namespace

TEST_CASE("exchange: asked before each layer's pass and each expert's block, and a stop ends the pass there") {
  auto plane = one_rank_plane();
  const Pass whole = run_pass(*plane, 0);
  REQUIRE(whole.status);
  CHECK_FALSE(whole.stopped);
  // 2 layers forward and backward, and every expert with rows (here all 4 of a layer) both ways
  CHECK(whole.asked == 2 * 2 + 2 * 2 * 4);
  CHECK(whole.expert_rows > 0);

  for (int from = 1; from <= whole.asked; ++from) {
    CAPTURE(from);
    const Pass p = run_pass(*plane, from);
    REQUIRE_FALSE(p.status);
    CHECK(p.stopped);
    CHECK(p.asked == from);  // nothing asked, so nothing computed, past the stop
    CHECK(p.status.error().message().find("stopped") != std::string::npos);
    CHECK(p.expert_rows < whole.expert_rows);
  }
  const Pass first = run_pass(*plane, 1);
  CHECK(first.status.error().message().find("layer 0: stopped before its forward") != std::string::npos);
  const Pass expert = run_pass(*plane, 2);  // layer 0's first expert: no expert computed yet
  CHECK(expert.status.error().message().find("layer 0: stopped before an expert's forward") != std::string::npos);
  CHECK(expert.expert_rows == 0);
  const Pass late = run_pass(*plane, whole.asked);  // the last expert's backward
  CHECK(late.status.error().message().find("stopped before an expert's backward") != std::string::npos);
}

TEST_CASE("exchange: its stop points change nothing of a pass that is not stopped") {
  auto plane = one_rank_plane();
  auto params = model::Params::create(dims(), kSeed, model::Params::all_experts(dims()));
  DistributedExchange ex(*plane, params, kEveryExpertHere);  // no `stopping` at all
  const model::Batch b = model::make_batch(corpus(), kSeed, 0, 0, kSequences, dims().seq_len);
  auto st = model::make_model(params)->step(b, int64_t(kSequences) * dims().seq_len, ex);
  REQUIRE(st);
  const Pass asked = run_pass(*plane, 0);
  REQUIRE(asked.status);
  CHECK(asked.ce_sum == st->ce_sum);
}

TEST_CASE("OnHost: an aborted step stops before its first layer, and cleared it computes the step as before") {
  auto plane = one_rank_plane();
  model::OptimConfig optim;
  DevicePlan plan;
  plan.comm = plane.get();
  plan.replicas = kEveryExpertHere;
  const model::Batch b = model::make_batch(corpus(), kSeed, 0, 0, kSequences, dims().seq_len);
  const int64_t tokens = int64_t(kSequences) * dims().seq_len;

  auto fresh = model::Params::create(dims(), kSeed, model::Params::all_experts(dims()));
  OnHost never(fresh, optim);
  REQUIRE(never.set_plan(plan));
  auto expected = never.step(b, tokens);
  REQUIRE(expected);

  auto params = model::Params::create(dims(), kSeed, model::Params::all_experts(dims()));
  OnHost host(params, optim);
  REQUIRE(host.set_plan(plan));
  host.abort("step aborted by the controller");
  auto stopped = host.step(b, tokens);
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error().message().find("layer 0: stopped before its forward") != std::string::npos);
  CHECK(host.step(b, tokens).error().message().find("stopped") != std::string::npos);  // until cleared
  host.clear_abort();
  REQUIRE(host.zero_grads());
  auto again = host.step(b, tokens);
  REQUIRE(again);
  CHECK(again->ce_sum == expected->ce_sum);
  CHECK(again->expert_rows == expected->expert_rows);
  for (const auto& [key, unit] : params.experts) CHECK(unit.g == fresh.experts.at(key).g);
}

}  // namespace exchange_stop_test
