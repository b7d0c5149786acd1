// book.h — the controller's book of dense snapshots (the recovery ladder's dense rung). Every
// train.checkpoint_every committed steps the ranks copy their share of the model to host memory
// and write it to <run>/snapshots/step-<s> in the background (writer.h); a snapshot is complete
// when every rank has answered and the units add up to the whole model, and only then is it
// offered for restores. A snapshot a lost rank never finishes is dropped. The newest `keep`
// complete ones are kept.
//
// Pure bookkeeping: the book does no I/O. It says which directory to write, which snapshot has
// just completed (its owner marks it on disk) and which old ones to remove.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/result.h"

namespace sal::ckpt {

struct Snapshot {
  uint64_t step = 0;
  std::string dir;
  uint32_t units = 0;
  uint64_t bytes = 0;          // what the ranks copied (weights and moments)
  double slowest_copy_ms = 0;  // the pause training saw (copying to host memory), slowest rank
  double slowest_ms = 0;       // copy + write, slowest rank
};

class SnapshotBook {
 public:
  SnapshotBook(std::string root, uint32_t model_units, size_t keep = 2);

  // A snapshot of `step` by `ranks`; returns the directory to write it into.
  std::string begin(uint64_t step, const std::vector<Participant>& ranks);

  struct Answer {
    uint32_t units = 0;
    uint64_t bytes = 0;
    double copy_ms = 0, ms = 0;
  };
  // What completing a snapshot did: the snapshot, and the complete ones that fell out of `keep`.
  struct Completed {
    Snapshot snapshot;
    std::vector<std::string> dropped;
  };
  // A rank's answer. Returns the snapshot when this answer completed it; an error when it failed
  // (the rank's failure, or units that do not add up to the model).
  Result<std::optional<Completed>> answer(Participant p, uint64_t step, bool ok, const Answer& a,
                                          const std::string& detail);
  // Drops the pending snapshots that wait on a rank that is not ready; returns their steps.
  std::vector<uint64_t> drop_waiting_on_lost(const std::vector<Participant>& ready);
  const std::optional<Snapshot>& latest() const { return latest_; }
  // A resumed job: the complete snapshots its journal lists (oldest first).
  void resume(const std::vector<Snapshot>& complete);
  const std::vector<Snapshot>& complete() const { return done_; }

 private:
  struct Pending {
    Snapshot s;
    std::set<Participant> waiting;
  };
  std::vector<std::string> keep_newest(const Snapshot& s);

  std::string root_;
  uint32_t model_units_;
  size_t keep_;
  std::map<uint64_t, Pending> pending_;
  std::vector<Snapshot> done_;
  std::optional<Snapshot> latest_;
};

}  // namespace sal::ckpt
