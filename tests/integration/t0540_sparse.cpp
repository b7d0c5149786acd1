// t0540_sparse.cpp — the checkpoint-window policy drives what live workers snapshot (MoEtion): every
// committed step that the plan's schedule gives a slot, each worker copies its share of it (the
// full state of the slot's operators, the compute weights of the later ones), keeps the newest
// complete window and the one being filled, and says so with its votes; job.checkpoint() shows
// the schedule and what each rank holds. A checkpoint policy loaded live changes the window at the
// next plan, and what is held stays bounded.
#include <doctest/doctest.h>

#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

// One operator a slot: the window is as long as the model has operators (7 here).
const char* kOneEach =
    "return { api = 1, kind = 'checkpoint', name = 'one-each', doc = 'one operator per iteration', "
    "decide = function(ctx) local s = {} for i = 1, #ctx.operators do s[i] = { i } end "
    "return { window = #ctx.operators, slots = s } end }";

}  // namespace

TEST_CASE("t0540-sparse-live: workers take the schedule's slots every step, job.checkpoint() shows them, and a policy loaded live changes the window") {
  TestMesh m({.agents = 3, .steps = 1000000, .train = "batch = 8, rebalance_every = 0, checkpoint_every = 0",
              .extra = "policies = { slots = 4, min_replicas = 1 },"});
  m.start();
  // the job's policy (moetion): this small model's whole snapshot fits an iteration, a window of 1
  REQUIRE_MESSAGE(eventually([&] { return m.eval_json("return job.checkpoint().complete_from ~= nil").get<bool>(); }, 20000, 20),
                  m.eval_json("return job.checkpoint()").dump() << " at " << m.status().dump());
  auto c = m.eval_json("return job.checkpoint()");
  CHECK(c["policy"] == "moetion gen 1");
  CHECK(c["window"] == 1);
  CHECK(c["operators_per_slot"][0] == 1 + 1 + 1 + 4);  // embeddings, dense, gate, 4 experts
  CHECK(c["workers"].size() == 3);
  CHECK(c["bytes"].get<int64_t>() > 0);
  // the slots are held in the other nodes' agents: two copies of each, the whole model restorable
  // (each agent reports within 100 ms of a window completing: wait until both of rank 0's have)
  REQUIRE_MESSAGE(eventually([&] {
    return m.eval_json("local c = job.checkpoint() return c.restorable ~= nil and c.operators.embedding ~= nil and "
                       "#c.operators.embedding.nodes == 2").get<bool>();
  }, 20000, 20), m.eval_json("return job.checkpoint()").dump());
  c = m.eval_json("return job.checkpoint()");
  CHECK(c["agents"].size() == 3);
  int64_t held = 0;
  for (const auto& a : c["agents"]) held += a["bytes"].get<int64_t>();
  CHECK(held > 0);  // rank 0 writes every unit here (each node holds every expert): nodes 1 and 2 hold them
  CHECK(c["agents"][0]["budget"] == 1024 << 20);
  CHECK(c["operators"]["embedding"]["nodes"].size() == 2);
  CHECK(c["operators"].size() == 1 + 1 + 1 + 4);

  // one operator a slot: the load asks for a plan, and with it (at the next step boundary) comes a
  // window of 7 iterations; the old window is held until the new one completes
  auto loaded = m.eval("policy.load('checkpoint', [[" + std::string(kOneEach) + "]])");
  REQUIRE_MESSAGE(loaded.ok, loaded.error);
  // no gap in coverage: every rank holds a complete window all along (the old one until the new completes)
  int gaps = 0;
  REQUIRE(eventually([&] {
    auto k = m.eval_json("return job.checkpoint()");
    gaps += !k.contains("complete_from");
    return k["window"] == 7;
  }, 20000, 5));
  int64_t plan_step = m.eval_json("return job.training().plan_from_step");
  REQUIRE(eventually([&] {
    auto k = m.eval_json("return job.checkpoint()");
    gaps += !k.contains("complete_from");
    return k.contains("complete_from") && k["complete_from"].get<int64_t>() >= plan_step;
  }, 30000, 5));
  CHECK(gaps == 0);
  c = m.eval_json("return job.checkpoint()");
  CHECK(c["policy"] == "one-each gen 2");
  int64_t from = c["complete_from"];
  CHECK(from % 7 == 0);  // windows start at multiples of the period
  uint64_t dense_bytes = 0;
  for (const auto& w : c["workers"]) {
    CAPTURE(w.dump());
    CHECK(w["window_to"].get<int64_t>() - w["window_from"].get<int64_t>() == 6);
    dense_bytes = std::max(dense_bytes, w["bytes"].get<uint64_t>());
  }
  // bounded: two windows (the complete one and the one being filled) at most, whatever the steps
  int64_t step_now = m.status()["step"];
  REQUIRE(eventually([&] { return m.status()["step"].get<int64_t>() >= step_now + 30; }, 30000, 20));
  auto later = m.eval_json("return job.checkpoint()");
  CHECK(later["complete_from"].get<int64_t>() > from);
  for (size_t i = 0; i < later["workers"].size(); ++i)
    CHECK(later["workers"][i]["bytes"].get<uint64_t>() <= 2 * std::max<uint64_t>(dense_bytes, 1));
}
