// slice_store.h — what a node holds of other workers' sparse snapshots (MoEtion's copies in peers'
// memory, plan/snapshot_peers.h says whose): for each writer, its newest complete window and the
// one being filled (ckpt::SparseHolder), within a memory budget for all of them together. A slot
// whose copies do not match their checksums is refused (it arrived damaged), and so is one that
// would take the store past its budget — what is held stays, so the last complete windows survive
// a flood; each refusal says which rule it broke. Pure: the agent that owns it does the I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckpt/sparse.h"

namespace sal::ckpt {

class SliceStore {
 public:
  explicit SliceStore(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // A slot `writer` took under `schedule` (a schedule other than the writer's last starts a new
  // window, its last complete one kept until the new one completes).
  Status add(const std::string& writer, const plan::CheckpointSchedule& schedule, SparseSlot slot);
  // The writer's newest complete window (empty: none, or an unknown writer).
  std::vector<const SparseSlot*> latest_complete(const std::string& writer) const;
  // A writer that left the job for good: its slices go.
  void drop(const std::string& writer) { held_.erase(writer); }
  std::vector<std::string> writers() const;
  uint64_t bytes() const;
  uint64_t budget() const { return budget_; }
  UnitCopy* find(const std::string& writer, uint64_t step, const UnitId& id);  // test hook: corrupt a copy

 private:
  uint64_t budget_;
  std::map<std::string, SparseHolder> held_;
};

}  // namespace sal::ckpt
