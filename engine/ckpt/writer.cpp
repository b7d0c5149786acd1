// writer.cpp — see writer.h.
#include "ckpt/writer.h"

#include "core/clock.h"
#include "core/paths.h"
#include "ckpt/format.h"

namespace sal::ckpt {

SnapshotWriter::SnapshotWriter(Done done) : done_(std::move(done)) {
  thread_ = std::thread([this] { run(); });
}

SnapshotWriter::~SnapshotWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void SnapshotWriter::write(std::string dir, uint64_t step, SnapshotUnits units, wire::SaveDone reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Job{std::move(dir), step, std::move(units), std::move(reply)});
  }
  cv_.notify_one();
}

void SnapshotWriter::cancel() {
  cancelled_ = true;
  cv_.notify_one();
}

void SnapshotWriter::run() {
  for (;;) {
    Job j;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      j = std::move(queue_.front());
      queue_.pop_front();
    }
    write_one(j);
  }
}

void SnapshotWriter::write_one(Job& j) {
  int64_t t0 = mono_ns();
  const Error cancelled = fail("cancelled: the worker is stopping");
  auto units = cancelled_ ? Result<model::UnitViews>(cancelled)
               : j.units  ? j.units()
                          : Result<model::UnitViews>(fail("no units to write"));
  j.units = nullptr;  // what the source held beside the views goes now
  Status s = !units ? Status(units.error()) : cancelled_ ? Status(cancelled) : make_dirs(j.dir);
  const size_t n = units ? units->units.size() : 0;
  for (size_t i = 0; s && i < n; ++i) s = cancelled_ ? Status(cancelled) : write_unit(j.dir, units->units[i], j.step);
  j.reply.ok = bool(s);
  j.reply.units = s ? uint32_t(n) : 0;
  j.reply.bytes = 0;
  j.reply.written.clear();
  if (s) {
    for (const auto& u : units->units) {
      j.reply.written.push_back(u.id.name());
      j.reply.bytes += 3 * u.size * sizeof(float);
    }
  }
  if (units) units->keep.reset();  // written: a GPU's pinned memory serves its next snapshot
  if (!s) j.reply.detail = s.error().with_context("snapshot of step " + std::to_string(j.step)).message();
  j.reply.ms += double(mono_ns() - t0) / 1e6;
  done_(std::move(j.reply));
}

}  // namespace sal::ckpt
