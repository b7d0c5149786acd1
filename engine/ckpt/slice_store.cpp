// slice_store.cpp — see slice_store.h.
#include "ckpt/slice_store.h"

namespace sal::ckpt {

Status SliceStore::add(const std::string& writer, const plan::CheckpointSchedule& schedule, SparseSlot slot) {
  for (const auto& [id, copy] : slot.units)
    if (unit_checksum(copy) != copy.checksum)
      return fail("slice of ", writer, " for iteration ", slot.step, " refused: ", id.name(),
                  " does not match its checksum (damaged on the way)");
  uint64_t after = bytes() + slot.bytes();
  if (after > budget_)
    return fail("slice of ", writer, " for iteration ", slot.step, " refused: ", slot.bytes(), " bytes would take the store to ",
                after, ", past its budget of ", budget_, " (the windows held are kept)");
  SparseHolder& h = held_[writer];
  if (!h.schedule() || !(*h.schedule() == schedule)) h.start(schedule);
  h.add(std::move(slot));
  return {};
}

std::vector<const SparseSlot*> SliceStore::latest_complete(const std::string& writer) const {
  auto it = held_.find(writer);
  return it == held_.end() ? std::vector<const SparseSlot*>{} : it->second.latest_complete();
}

std::vector<std::string> SliceStore::writers() const {
  std::vector<std::string> out;
  for (const auto& [w, h] : held_) out.push_back(w);
  return out;
}

uint64_t SliceStore::bytes() const {
  uint64_t n = 0;
  for (const auto& [w, h] : held_) n += h.bytes();
  return n;
}

UnitCopy* SliceStore::find(const std::string& writer, uint64_t step, const UnitId& id) {
  auto it = held_.find(writer);
  return it == held_.end() ? nullptr : it->second.find(step, id);
}

}  // namespace sal::ckpt
