// slice_store.cpp — see slice_store.h.
#include "ckpt/slice_store.h"

#include <algorithm>

namespace sal::ckpt {

Status SliceStore::add(const Writer& writer, uint64_t plan, const plan::CheckpointSchedule& schedule, SparseSlot slot) {
  const std::string who = writer.name();
  for (const auto& [id, copy] : slot.units)
    if (unit_checksum(copy) != copy.checksum)
      return fail("slice of ", who, " for iteration ", slot.step, " refused: ", id.name(),
                  " does not match its checksum (damaged on the way)");
  uint64_t after = bytes() + slot.bytes();
  if (after > budget_)
    return fail("slice of ", who, " for iteration ", slot.step, " refused: ", slot.bytes(), " bytes would take the store to ",
                after, ", past its budget of ", budget_, " (the windows held are kept)");
  Held& h = held_[writer];
  if (!h.slots.schedule() || !(*h.slots.schedule() == schedule) || h.plan != plan) h.slots.start(schedule);
  h.plan = plan;
  h.newest = std::max(h.newest, slot.step);
  bool completes = slot.index + 1 == schedule.window;
  uint64_t from = slot.step - slot.index;
  h.slots.add(std::move(slot));
  auto w = h.slots.latest_complete();
  if (completes && !w.empty() && w.front()->step == from)
    drop_stopped(from >= schedule.period ? from - schedule.period : 0, plan);
  return {};
}

// Writers of an older plan whose newest slot is older than the window before one just completed
// under a newer plan have stopped writing here (the newer plan's writers cover what they wrote).
// The window before stays: a writer of the newer plan may have died before its first slot got
// here, and that window is then the newest every writer shares (until 2026-12-01 the older plan's
// writers went as soon as the newer plan's first window completed). Writers of the same plan are
// never dropped: a slot of theirs for the same iteration may still be on its way.
void SliceStore::drop_stopped(uint64_t keep_from, uint64_t plan) {
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.plan < plan && it->second.newest < keep_from) {
      logs_.erase(it->first);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
}

Status SliceStore::add_log(const Writer& writer, uint64_t step, const plan::CheckpointSchedule& schedule, HeldLog log) {
  const std::string who = writer.name();
  for (const auto& [key, r] : log.log.rows)
    if (r.checksum == 0)
      return fail("log of ", who, " for iteration ", step, " refused: layer ", key.layer, " expert ", key.expert,
                  " has no checksum");
  for (const auto& [key, t] : log.log.tokens)
    if (t.checksum == 0)
      return fail("log of ", who, " for iteration ", step, " refused: layer ", key.second, "'s tokens have no checksum");
  auto& mine = logs_[writer];
  auto old = mine.find(step);
  const uint64_t replaced = old == mine.end() ? 0 : old->second.bytes();
  const uint64_t after = bytes() - replaced + log.bytes();
  if (after > budget_)
    return fail("log of ", who, " for iteration ", step, " refused: ", log.bytes(), " bytes would take the store to ", after,
                ", past its budget of ", budget_, " (what is held is kept)");
  mine[step] = std::move(log);
  // as far back as the writer's windows: those kept and the one being filled
  const uint64_t span = uint64_t(kWindowsKept + 1) * std::max<uint64_t>(schedule.period, 1);
  const uint64_t newest = mine.rbegin()->first;
  while (!mine.empty() && mine.begin()->first + span <= newest) mine.erase(mine.begin());
  return {};
}

std::vector<std::tuple<Writer, uint64_t, const HeldLog*>> SliceStore::logs(uint64_t from, uint64_t to) const {
  std::vector<std::tuple<Writer, uint64_t, const HeldLog*>> out;
  for (const auto& [writer, mine] : logs_)
    for (auto it = mine.lower_bound(from); it != mine.end() && it->first <= to; ++it)
      out.emplace_back(writer, it->first, &it->second);
  return out;
}

uint64_t SliceStore::log_bytes() const {
  uint64_t n = 0;
  for (const auto& [w, mine] : logs_)
    for (const auto& [step, l] : mine) n += l.bytes();
  return n;
}

std::vector<const SparseSlot*> SliceStore::latest_complete(const Writer& writer) const {
  auto it = held_.find(writer);
  return it == held_.end() ? std::vector<const SparseSlot*>{} : it->second.slots.latest_complete();
}

std::vector<HeldWindow> SliceStore::windows() const {
  std::vector<HeldWindow> out;
  for (const auto& [writer, h] : held_)
    for (const auto& w : h.slots.complete_windows()) {
      HeldWindow hw{writer, h.plan, w.front()->step, w.back()->step, {}};
      for (const SparseSlot* s : w)
        for (const auto& [id, copy] : s->units)
          if (copy.full) hw.units.push_back(id);
      out.push_back(std::move(hw));
    }
  return out;
}

std::vector<SlotView> SliceStore::window_slots(uint64_t from, const std::set<UnitId>& wanted,
                                               std::vector<UnitId>* missing) const {
  std::vector<SlotView> out;
  std::set<UnitId> found;
  for (const auto& [writer, h] : held_)
    for (const auto& w : h.slots.complete_windows()) {
      if (w.front()->step != from) continue;
      if (out.size() < w.size()) out.resize(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        out[i].step = w[i]->step, out[i].index = w[i]->index, out[i].grad_norm = w[i]->grad_norm;
        for (const auto& [id, copy] : w[i]->units)
          if (wanted.count(id) && !found.count(id)) out[i].units.emplace_back(id, &copy);
      }
      for (const SparseSlot* s : w)
        for (const auto& [id, copy] : s->units)
          if (wanted.count(id)) found.insert(id);
    }
  if (missing)
    for (const UnitId& id : wanted)
      if (!found.count(id)) missing->push_back(id);
  return out;
}

std::vector<Writer> SliceStore::writers() const {
  std::vector<Writer> out;
  for (const auto& [w, h] : held_) out.push_back(w);
  return out;
}

uint64_t SliceStore::bytes() const {
  uint64_t n = log_bytes();
  for (const auto& [w, h] : held_) n += h.slots.bytes();
  return n;
}

UnitCopy* SliceStore::find(const Writer& writer, uint64_t step, const UnitId& id) {
  auto it = held_.find(writer);
  return it == held_.end() ? nullptr : it->second.slots.find(step, id);
}

}  // namespace sal::ckpt
