// slice_store.h — what a node holds of other workers' sparse snapshots (MoEtion's copies in peers'
// memory, plan/snapshot_peers.h says whose): for each writer, its two newest complete windows and
// the one being filled (ckpt::SparseHolder), within a memory budget for all of them together. A slot
// whose copies do not match their checksums is refused (it arrived damaged), and so is one that
// would take the store past its budget — what is held stays, so the last complete windows survive
// a flood; each refusal says which rule it broke. A writer's slots under another plan (or
// schedule) start a new window, its last complete one kept until the new schedule has two complete
// windows of its own. A writer that stopped writing — it wrote under an older plan than a window
// another writer just completed, and has no slot of that window nor of the window before: it left,
// or writes elsewhere now — is dropped then (a restore needs the old plan's windows only until the
// new plan's cover the model; the window before stays because a new writer killed before its first
// slot got anywhere leaves that one as the newest every writer shares). Pure: the agent that owns
// it does the I/O.
//
// It also holds the writers' upstream logs (model/expert_replay.h: what each dispatched to the
// experts, iteration by iteration), as long as the writer's windows reach back — the iterations
// of its kWindowsKept windows and the one being filled — within the same budget. A log arrives
// every step, so its checksums are not recomputed here (the MAC checked it on the way in); the
// worker that fetches it checks them (runtime/slice_fetch.h). A lost expert is rebuilt from its copy
// in a window and the logs of the iterations after it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ckpt/sparse.h"

namespace sal::ckpt {

// A worker whose slots a store holds: its node and its index there.
struct Writer {
  uint32_t node = 0;
  uint32_t index = 0;
  std::string name() const { return std::to_string(node) + "." + std::to_string(index); }
  auto operator<=>(const Writer&) const = default;
};

// A complete window a store holds: whose, under which plan, its iterations, the units in it.
struct HeldWindow {
  Writer writer;
  uint64_t plan = 0;
  uint64_t from = 0, to = 0;
  std::vector<UnitId> units;
};

// An iteration's upstream log of one writer, as the store holds it.
struct HeldLog {
  uint64_t plan = 0;
  model::IterationLog log;  // with the checksums the writer took
  size_t bytes() const { return log.bytes(); }
};

// Slot `index` of a window as a fetch answers it: the copies asked for, from whichever writers.
struct SlotView {
  uint64_t step = 0;
  uint32_t index = 0;
  double grad_norm = 0;
  std::vector<std::pair<UnitId, const UnitCopy*>> units;
};

class SliceStore {
 public:
  // Complete windows kept per writer: the newest and the one before (the newest slot of a writer
  // that dies may never arrive; the window before is then the one every writer shares).
  static constexpr size_t kWindowsKept = 2;
  explicit SliceStore(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // A slot `writer` took under plan `plan`'s `schedule`.
  Status add(const Writer& writer, uint64_t plan, const plan::CheckpointSchedule& schedule, SparseSlot slot);
  // The writer's newest complete window (empty: none, or an unknown writer).
  std::vector<const SparseSlot*> latest_complete(const Writer& writer) const;
  // Every complete window of every writer.
  std::vector<HeldWindow> windows() const;
  // The slots of the complete windows beginning at `from` that hold `wanted`, one per slot index
  // (in order), each with the wanted copies found in it; `missing` gets the units no window has.
  std::vector<SlotView> window_slots(uint64_t from, const std::set<UnitId>& wanted, std::vector<UnitId>* missing) const;
  // Writer's log of iteration `step` under plan `plan` (whose schedule's period says how far back
  // logs are kept); a newer log of the same iteration (the step ran again) replaces it.
  Status add_log(const Writer& writer, uint64_t step, const plan::CheckpointSchedule& schedule, HeldLog log);
  // Every log held of iterations from..to, by writer and iteration.
  std::vector<std::tuple<Writer, uint64_t, const HeldLog*>> logs(uint64_t from, uint64_t to) const;
  uint64_t log_bytes() const;
  // A writer that left the job for good: its slices and logs go.
  void drop(const Writer& writer) {
    held_.erase(writer);
    logs_.erase(writer);
  }
  std::vector<Writer> writers() const;
  uint64_t bytes() const;
  uint64_t budget() const { return budget_; }
  void set_budget(uint64_t bytes) { budget_ = bytes; }
  UnitCopy* find(const Writer& writer, uint64_t step, const UnitId& id);  // test hook: corrupt a copy

 private:
  struct Held {
    uint64_t plan = 0;
    uint64_t newest = 0;  // the newest slot's iteration
    SparseHolder slots{kWindowsKept};
  };
  void drop_stopped(uint64_t keep_from, uint64_t plan);
  uint64_t budget_;
  std::map<Writer, Held> held_;
  std::map<Writer, std::map<uint64_t, HeldLog>> logs_;  // by writer, by iteration
};

}  // namespace sal::ckpt
