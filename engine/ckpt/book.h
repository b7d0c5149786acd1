// book.h — the controller's book of dense snapshots (the recovery ladder's dense rung). Every
// train.checkpoint_every committed steps the ranks copy the units they are to write to host memory
// and write them to <run>/snapshots/step-<s> in the background (writer.h). Each unit is written by
// up to two of its holders (Trainer::snapshot_units), so a snapshot survives the loss of a writer:
// it is complete as soon as every unit of the model has been written by *some* rank — even while
// other ranks are still writing, or after one of them was lost — and only then is it offered for
// restores. It fails once no rank still writing can cover the units missing. The newest `keep`
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
    std::vector<std::string> written;  // the names of the units this rank wrote (UnitId::name)
    uint64_t bytes = 0;
    double copy_ms = 0, ms = 0;
  };
  // What completing a snapshot did: the snapshot, and the complete ones that fell out of `keep`.
  struct Completed {
    Snapshot snapshot;
    std::vector<std::string> dropped;
  };
  // A rank's answer. Returns the snapshot when this answer completed it (every unit written by
  // some rank); an error when the snapshot failed: the last rank it waited on answered, and units
  // are missing (the detail of each rank that failed is in the message). A failed rank's answer
  // alone does not fail a snapshot that others can still complete.
  Result<std::optional<Completed>> answer(Participant p, uint64_t step, bool ok, const Answer& a,
                                          const std::string& detail);
  // Forgets the ranks that are not ready; drops the pending snapshots that no rank still writing
  // can complete; returns their steps.
  std::vector<uint64_t> drop_waiting_on_lost(const std::vector<Participant>& ready);
  const std::optional<Snapshot>& latest() const { return latest_; }
  // A complete snapshot that a restore could not read (a unit file damaged or gone): forgotten, so
  // the next restore takes the one before it, or none. False when `dir` is none of the complete ones.
  bool forget(const std::string& dir);
  // A resumed job: the complete snapshots its journal lists (oldest first).
  void resume(const std::vector<Snapshot>& complete);
  const std::vector<Snapshot>& complete() const { return done_; }

 private:
  struct Pending {
    Snapshot s;
    std::set<Participant> waiting;
    std::set<std::string> written;
    std::string failures;  // "; worker n.i: why" for each rank that failed
  };
  std::vector<std::string> keep_newest(const Snapshot& s);
  Result<std::optional<Completed>> settle(std::map<uint64_t, Pending>::iterator it);

  std::string root_;
  uint32_t model_units_;
  size_t keep_;
  std::map<uint64_t, Pending> pending_;
  std::vector<Snapshot> done_;
  std::optional<Snapshot> latest_;
};

}  // namespace sal::ckpt
