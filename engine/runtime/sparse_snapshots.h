// sparse_snapshots.h — a worker acting on the checkpoint policy's schedule (MoEtion): after each
// committed step that takes a slot, the worker copies its share of it — the full state of the
// slot's operators and the compute weights of the later slots' (ckpt/sparse.h), of the units it
// writes (each non-expert unit on rank 0, each expert on the lowest rank holding it) — and keeps
// the newest complete window and the one being filled. A new plan starts a new window (what the
// worker writes, or the schedule, may have changed) and keeps the last complete window of the old
// one until the new one completes, so there is no gap in coverage. What it holds is reported with
// every vote (the controller's job.checkpoint()).
//
// The copies stay in the worker's memory for now; holding them in peers' agents (so they survive
// the worker and its node) and the restore from them are the next parts of the work.
#pragma once

#include <vector>

#include "ckpt/sparse.h"
#include "plan/schedule.h"

namespace sal::runtime {

// What a worker holds, as a vote reports it.
struct SparseHeld {
  uint64_t bytes = 0;       // every slot held (the complete window and the one being filled)
  int64_t window_from = -1; // the newest complete window's first and last iterations (-1: none)
  int64_t window_to = -1;
  double copy_ms = 0;       // the last slot's copy (the pause the step after the commit sees)
  uint64_t slot_bytes = 0;  // ... and its bytes
};

class SparseSnapshots {
 public:
  // A plan was applied: its schedule from now on.
  void start(const plan::CheckpointSchedule& schedule);
  // Whether the schedule gives `step` a slot (the caller gathers the units only then).
  bool takes_slot(uint64_t step) const;
  // After `step`'s update: its slot, if the schedule gives it one.
  void after_commit(uint64_t step, double grad_norm, const ModelShape& shape,
                    const std::vector<const model::Unit*>& units);
  SparseHeld held() const;
  // The newest complete window (this plan's, else the one before it): what a restore replays.
  std::vector<const ckpt::SparseSlot*> latest_complete() const;

 private:
  ckpt::SparseHolder holder_;
  double copy_ms_ = 0;
  uint64_t slot_bytes_ = 0;
};

}  // namespace sal::runtime
