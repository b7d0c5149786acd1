// sparse_snapshots.cpp — see sparse_snapshots.h.
#include "runtime/sparse_snapshots.h"

#include "core/clock.h"

namespace sal::runtime {

void SparseSnapshots::start(const plan::CheckpointSchedule& schedule) { holder_.start(schedule); }

bool SparseSnapshots::takes_slot(uint64_t step) const {
  const plan::CheckpointSchedule* schedule = holder_.schedule();
  return schedule && ckpt::slot_of(*schedule, step).has_value();
}

void SparseSnapshots::after_commit(uint64_t step, double grad_norm, const ModelShape& shape,
                                   const std::vector<const model::Unit*>& units) {
  const plan::CheckpointSchedule* schedule = holder_.schedule();
  if (!schedule) return;
  auto index = ckpt::slot_of(*schedule, step);
  if (!index) return;
  int64_t t0 = mono_ns();
  auto slot = ckpt::take_slot(*schedule, *index, step, grad_norm, shape, units, holder_.recycled());
  copy_ms_ = double(mono_ns() - t0) / 1e6;
  slot_bytes_ = slot.bytes();
  holder_.add(std::move(slot));
}

std::vector<const ckpt::SparseSlot*> SparseSnapshots::latest_complete() const { return holder_.latest_complete(); }

SparseHeld SparseSnapshots::held() const {
  SparseHeld h;
  h.bytes = holder_.bytes();
  auto w = holder_.latest_complete();
  if (!w.empty()) h.window_from = int64_t(w.front()->step), h.window_to = int64_t(w.back()->step);
  h.copy_ms = copy_ms_;
  h.slot_bytes = slot_bytes_;
  return h;
}

}  // namespace sal::runtime
