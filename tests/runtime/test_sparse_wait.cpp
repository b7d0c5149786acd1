// test_sparse_wait.cpp — runtime::SparseSnapshots' wait() as the trainer relies on it: it holds the
// trainer back only while a slot taken or waiting for the snapshot thread reads the trainer's units
// (a CPU worker's); a GPU worker's slot, copied off the device already, waiting behind a slow put
// does not hold back an update or a plan switch (on the H200 a two-worker re-plan spent seconds
// around such waits). Pure logic on one machine: the slots' copies are lambdas the test blocks, the
// one peer an endpoint nobody listens on (each put is missed at once).
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>

#include "core/model_shape.h"
#include "model/params.h"
#include "runtime/sparse_snapshots.h"

using namespace sal;

namespace sparse_wait {  // named: test_runtime is built as one unity source

constexpr const char* kKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

model::Dims tiny() {
  model::Dims d;
  d.vocab = 16, d.d = 8, d.heads = 2, d.layers = 1, d.experts = 2, d.top_k = 1, d.seq_len = 4;
  return d;
}

// A window of one iteration: every step takes the one slot, of every operator.
plan::CheckpointSchedule every_step(const model::Dims& d) {
  plan::CheckpointSchedule s{1, 1, std::vector<std::vector<uint32_t>>(1)};
  for (uint32_t op = 0; op < uint32_t(model_unit_count(d)); ++op) s.slots[0].push_back(op);
  return s;
}

// A GPU worker's slot whose copy is not done until the test says so.
struct HeldCopy {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  ckpt::SnapshotUnits units() {
    return [this]() -> Result<model::UnitViews> {
      entered.set_value();
      released.wait();
      return fail("the test's slot");  // the thread warns and goes on
    };
  }
};

bool returns_within(std::future<void>& f, std::chrono::milliseconds t) {
  return f.wait_for(t) == std::future_status::ready;
}

}  // namespace sparse_wait

TEST_CASE("sparse snapshots: a copied slot waiting behind a slow one does not hold the trainer, a host slot does") {
  zmq::context_t ctx;
  using namespace std::chrono_literals;
  using sparse_wait::HeldCopy;
  using sparse_wait::returns_within;
  const model::Dims d = sparse_wait::tiny();
  model::Params p = model::Params::create(d, 3, model::Params::all_experts(d));
  std::vector<const model::Unit*> units;
  for (const model::Unit* u : p.units()) units.push_back(u);
  runtime::SparseSnapshots snaps(ctx);
  snaps.start(sparse_wait::every_step(d),
              runtime::SliceRoute{0, 0, 1, {wire::SliceNode{1, "tcp://127.0.0.1:9", ""}}, 0, "", sparse_wait::kKey});

  HeldCopy first;
  snaps.after_commit_copied(0, 1.0, d, first.units());
  REQUIRE(first.entered.get_future().wait_for(10s) == std::future_status::ready);  // the thread is in it

  SUBCASE("a GPU worker's next slot waits for the thread; the trainer does not") {
    HeldCopy second;
    snaps.after_commit_copied(1, 1.0, d, second.units());  // waits for the thread, which is busy
    auto waited = std::async(std::launch::async, [&] { snaps.wait(); });
    const bool prompt = returns_within(waited, 2s);
    first.release.set_value();
    second.release.set_value();
    CHECK(prompt);  // the old wait() returned only once the thread took the second slot
    waited.get();
  }
  SUBCASE("a CPU worker's slot reads the units: the trainer waits until it is copied") {
    snaps.after_commit(1, 1.0, d, units);  // queued: the thread is still in the first slot
    auto waited = std::async(std::launch::async, [&] { snaps.wait(); });
    CHECK_FALSE(returns_within(waited, 300ms));
    first.release.set_value();
    CHECK(returns_within(waited, 10s));
    waited.get();
  }
  snaps.wait();
}
