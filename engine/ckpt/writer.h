// writer.h — the worker's asynchronous dense snapshots. Between two steps the training thread
// takes a copy of the units this rank is responsible for (Trainer::snapshot_share: on a CPU worker
// a plain memory copy, the pause training sees; on a GPU worker the start of a copy to pinned host
// memory that overlaps the next step); this writer's own thread then gets the units (SnapshotUnits:
// on a GPU worker it waits there for the copy), writes them to disk from where they lie, one file
// per unit (format.h), while training goes on, lets go of them (a GPU's pinned memory is then free
// for its next snapshot), and reports the outcome through a callback (on the writer's thread).
// Writes run in order; the destructor finishes what is queued, unless cancel() came first: a
// stopping worker's snapshots are answered to no one (the job's final checkpoint is written apart
// from them), and finishing them (1.9 GB each for the GPU job) outlasted the agent's two seconds
// for a worker to stop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "model/params.h"
#include "wire/messages.h"

namespace sal::ckpt {

// The units a snapshot writes, produced on the writer's thread (a GPU worker's waits for its copy
// and gives views into the pinned memory; its error is the snapshot's). Called at most once; the
// views are valid until the result's `keep` is dropped.
using SnapshotUnits = std::function<Result<model::UnitViews>()>;

class SnapshotWriter {
 public:
  using Done = std::function<void(wire::SaveDone)>;
  explicit SnapshotWriter(Done done);
  ~SnapshotWriter();

  // `reply` is the SaveDone to complete (ok, detail, units, ms) and hand to `done`. `units` is
  // called before anything is written, and dropped once it has been.
  void write(std::string dir, uint64_t step, SnapshotUnits units, wire::SaveDone reply);

  // Stops early: the write in progress ends before its next unit, the queued ones are not
  // started, and each is answered not ok ("cancelled: ..."). Later write() calls are cancelled too.
  void cancel();

 private:
  struct Job {
    std::string dir;
    uint64_t step = 0;
    SnapshotUnits units;
    wire::SaveDone reply;
  };
  void run();
  void write_one(Job& j);

  Done done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

}  // namespace sal::ckpt
