// test_restore_errors.cpp — a worker that cannot read the dense snapshot a restoring plan names
// says so apart from any other failure (runtime/trainer.h, kSnapshotUnreadable; PlanReady carries
// it), so that the controller forgets that snapshot and restores the one before it, and forgets
// nothing when the worker failed for its own reasons. Real Trainers, real files.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "ckpt/format.h"
#include "runtime/trainer.h"
#include "runtime/trainer_fixtures.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::runtime;

namespace {

std::string temp_snapshot_dir() {
  return sal::test::temp_dir("restore");
}

wire::PlanUpdate restoring(uint64_t number, const std::string& store, const std::string& dir) {
  auto p = plan_update(number, 4, store);
  p.restore = true;
  p.restore_dir = dir;
  return p;
}

}  // namespace

TEST_CASE("a restore whose snapshot has no file for a unit, or a damaged one, fails as unreadable, naming the file") {
  Store store;
  CpuTrainer cpu;
  Trainer& t = cpu.t;
  const std::string dir = temp_snapshot_dir();
  auto s = t.apply_plan(restoring(1, store.endpoint, dir));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == kSnapshotUnreadable);
  CHECK(s.error().message().find(dir + "/") != std::string::npos);

  std::ofstream(ckpt::unit_file(dir, UnitId{UnitKind::embedding, -1, -1})) << "not a unit";
  s = t.apply_plan(restoring(2, store.endpoint, dir));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == kSnapshotUnreadable);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a restoring plan that fails for another reason is not the snapshot's fault") {
  Store store;
  CpuTrainer cpu;
  Trainer& t = cpu.t;
  t.abandon(3, "worker 1.0 left");
  auto s = t.apply_plan(restoring(3, store.endpoint, "/nonexistent/snapshots/step-4"));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() != kSnapshotUnreadable);
  // and the seed (no directory) restores
  auto seed = restoring(4, store.endpoint, "");
  seed.step = 0;
  CHECK(t.apply_plan(seed).ok());
}
