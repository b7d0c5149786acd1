// test_snapshot_writer.cpp — ckpt::SnapshotWriter as pure logic on one machine: writes in order
// and reports each; cancel() stops the write in progress before its next unit, skips the queued
// ones and answers every one of them not ok, so a stopping worker is not held up by snapshots no
// one will read. And the end-of-job sweep of snapshot folders never completed.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include "ckpt/format.h"
#include "ckpt/writer.h"
#include "model/params.h"

using namespace sal;

namespace {

std::string fresh_dir(const char* tag) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/sal-writer-" + tag + "-" +
                    std::to_string(getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

std::vector<model::Unit> units_of(int n) {
  model::Dims d;
  d.vocab = 16, d.d = 8, d.layers = 1, d.experts = n, d.seq_len = 4;
  std::vector<model::Unit> us;
  for (int e = 0; e < n; ++e) us.push_back(model::make_unit(d, UnitId{UnitKind::expert, 0, e}, 7));
  return us;
}

// Collects the writer's answers (on its thread).
struct Answers {
  std::mutex mu;
  std::vector<wire::SaveDone> got;
  void add(wire::SaveDone d) {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(std::move(d));
  }
};

wire::SaveDone reply(uint64_t step) {
  wire::SaveDone r;
  r.step = step, r.snapshot = true;
  return r;
}

}  // namespace

TEST_CASE("a snapshot writer writes its queue in order and reports each write") {
  const std::string dir = fresh_dir("order");
  Answers a;
  {
    ckpt::SnapshotWriter w([&a](wire::SaveDone d) { a.add(std::move(d)); });
    for (uint64_t step : {1, 2})
      w.write(dir + "/" + std::to_string(step), step,
              [] { return Result<model::UnitViews>(model::views_of(units_of(3))); },
              reply(step));
  }  // the destructor finishes what is queued
  REQUIRE(a.got.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(a.got[i].step == i + 1);
    CHECK(a.got[i].ok);
    CHECK(a.got[i].units == 3);
    CHECK(std::filesystem::exists(ckpt::unit_file(dir + "/" + std::to_string(i + 1), UnitId{UnitKind::expert, 0, 2})));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a cancelled snapshot writer stops the write in progress and skips the queued ones") {
  const std::string dir = fresh_dir("cancel");
  Answers a;
  std::promise<void> started, cancelled;
  auto cancelled_f = cancelled.get_future().share();
  bool second_called = false;
  {
    ckpt::SnapshotWriter w([&a](wire::SaveDone d) { a.add(std::move(d)); });
    // The first write's units arrive only after cancel() (as a GPU copy still in flight would).
    w.write(dir + "/1", 1,
            [&started, cancelled_f] {
              started.set_value();
              cancelled_f.wait();
              return Result<model::UnitViews>(model::views_of(units_of(4)));
            },
            reply(1));
    w.write(dir + "/2", 2,
            [&second_called] {
              second_called = true;
              return Result<model::UnitViews>(model::views_of(units_of(4)));
            },
            reply(2));
    REQUIRE(started.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    w.cancel();
    cancelled.set_value();
    w.write(dir + "/3", 3, [] { return Result<model::UnitViews>(model::views_of(units_of(1))); }, reply(3));
  }  // the destructor joins the writer
  CHECK_FALSE(second_called);
  REQUIRE(a.got.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(a.got[i].step == i + 1);
    CHECK_FALSE(a.got[i].ok);
    CHECK(a.got[i].units == 0);
    CHECK(a.got[i].detail.find("cancelled: the worker is stopping") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir + "/" + std::to_string(i + 1)));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("remove_incomplete_snapshots removes the snapshot folders without a complete marker, and only those") {
  const std::string root = fresh_dir("sweep");
  std::filesystem::create_directories(root + "/step-10");
  std::filesystem::create_directories(root + "/step-20");
  std::filesystem::create_directories(root + "/step-30");
  ckpt::Snapshot done;
  done.step = 20, done.dir = root + "/step-20", done.units = 3;
  REQUIRE(ckpt::mark_complete(done).ok());
  auto removed = ckpt::remove_incomplete_snapshots(root);
  CHECK(removed.size() == 2);
  CHECK_FALSE(std::filesystem::exists(root + "/step-10"));
  CHECK(std::filesystem::exists(root + "/step-20"));
  CHECK_FALSE(std::filesystem::exists(root + "/step-30"));
  CHECK(ckpt::remove_incomplete_snapshots(root + "/no-such-dir").empty());
  std::filesystem::remove_all(root);
}
