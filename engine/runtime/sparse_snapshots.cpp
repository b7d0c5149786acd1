// sparse_snapshots.cpp — see sparse_snapshots.h.
#include "runtime/sparse_snapshots.h"

#include "core/clock.h"

namespace sal::runtime {

void SparseSnapshots::start(const plan::CheckpointSchedule& schedule) {
  if (current_ && !current_->latest_complete().empty()) previous_ = std::move(current_);
  current_ = std::make_unique<ckpt::SparseWindows>(schedule);
}

void SparseSnapshots::after_commit(uint64_t step, double grad_norm, const ModelShape& shape,
                                   const std::vector<const model::Unit*>& units) {
  if (!current_) return;
  auto index = ckpt::slot_of(current_->schedule(), step);
  if (!index) return;
  int64_t t0 = mono_ns();
  auto slot = ckpt::take_slot(current_->schedule(), *index, step, grad_norm, shape, units);
  copy_ms_ = double(mono_ns() - t0) / 1e6;
  slot_bytes_ = slot.bytes();
  current_->add(std::move(slot));
  if (!current_->latest_complete().empty()) previous_.reset();  // covered by the new plan's window
}

std::vector<const ckpt::SparseSlot*> SparseSnapshots::latest_complete() const {
  if (current_) {
    auto w = current_->latest_complete();
    if (!w.empty()) return w;
  }
  return previous_ ? previous_->latest_complete() : std::vector<const ckpt::SparseSlot*>{};
}

SparseHeld SparseSnapshots::held() const {
  SparseHeld h;
  h.bytes = (current_ ? current_->bytes() : 0) + (previous_ ? previous_->bytes() : 0);
  auto w = latest_complete();
  if (!w.empty()) h.window_from = int64_t(w.front()->step), h.window_to = int64_t(w.back()->step);
  h.copy_ms = copy_ms_;
  h.slot_bytes = slot_bytes_;
  return h;
}

}  // namespace sal::runtime
