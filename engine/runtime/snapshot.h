// snapshot.h — the worker's asynchronous dense snapshots. Between two steps the training thread
// copies the units this rank is responsible for (a plain memory copy: the pause training sees);
// this writer's own thread then writes them to disk, one file per unit (model/checkpoint.h), while
// training goes on, and reports the outcome through a callback (on the writer's thread). Writes run
// in order; the destructor finishes what is queued.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/params.h"
#include "wire/messages.h"

namespace sal::runtime {

class SnapshotWriter {
 public:
  using Done = std::function<void(wire::SaveDone)>;
  explicit SnapshotWriter(Done done);
  ~SnapshotWriter();

  // `reply` is the SaveDone to complete (ok, detail, units, ms) and hand to `done`.
  void write(std::string dir, uint64_t step, std::vector<model::Unit> units, wire::SaveDone reply);

 private:
  struct Job {
    std::string dir;
    uint64_t step = 0;
    std::vector<model::Unit> units;
    wire::SaveDone reply;
  };
  void run();
  void write_one(Job& j);

  Done done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sal::runtime
