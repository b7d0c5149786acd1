// snapshots.h — the controller's book of dense snapshots (the recovery ladder's last rung). Every
// train.checkpoint_every committed steps the ranks copy their share of the model to host memory
// and write it to <run>/snapshots/step-<s> in the background (runtime/snapshot.h); a snapshot is
// complete when every rank has answered and the units add up to the whole model, and only then is
// it marked (a file "complete") and offered for restores. A snapshot a lost rank never finishes is
// dropped. The newest `keep` complete ones are kept on disk.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "mesh/steps.h"

namespace sal::mesh {

struct Snapshot {
  uint64_t step = 0;
  std::string dir;
  uint32_t units = 0;
  double slowest_copy_ms = 0;  // the pause training saw (copying to host memory), slowest rank
  double slowest_ms = 0;       // copy + write, slowest rank
};

class SnapshotBook {
 public:
  SnapshotBook(std::string root, uint32_t model_units, size_t keep = 2);

  // A snapshot of `step` by `ranks`; returns the directory to write it into.
  std::string begin(uint64_t step, const std::vector<Participant>& ranks);
  // A rank's answer. Returns the snapshot when this answer completed it; an error when it failed.
  Result<std::optional<Snapshot>> answer(Participant p, uint64_t step, bool ok, uint32_t units, double copy_ms,
                                         double ms, const std::string& detail);
  // Drops the pending snapshots that wait on a rank that is not ready; returns their steps.
  std::vector<uint64_t> drop_waiting_on_lost(const std::vector<Participant>& ready);
  const std::optional<Snapshot>& latest() const { return latest_; }

 private:
  struct Pending {
    Snapshot s;
    std::set<Participant> waiting;
  };
  void complete(const Snapshot& s);

  std::string root_;
  uint32_t model_units_;
  size_t keep_;
  std::map<uint64_t, Pending> pending_;
  std::vector<Snapshot> done_;
  std::optional<Snapshot> latest_;
};

}  // namespace sal::mesh
