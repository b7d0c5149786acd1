// sparse.h — MoEtion's sparse snapshots as data, and the replay that turns a window of them back
// into the dense state (docs/checkpoints.md, "Sparse snapshots").
//
// The checkpoint policy's schedule (plan::CheckpointSchedule) names, for slot i of a window of W
// iterations, the operators whose *full state* (weights and both AdamW moments) is copied after
// that iteration's update; every operator appears in exactly one slot. Slot i also copies the
// *compute weights* (weights only) of every operator that a later slot takes in full, so that after
// loading slot i every operator is either complete as of that iteration or can run frozen with
// that iteration's weights. Iteration `step` takes slot (step mod period) when that is < window;
// a window is complete when its W slots are of consecutive iterations starting at a multiple of
// the period. Each unit copy carries an FNV-1a checksum of its floats (by 64-bit words), and a slot carries the
// global gradient norm of its own iteration (the replay clips with it: frozen operators add no
// gradient, so the norm a replayed step computes is not the one the run used).
//
// Replay (replay_window): load slot 0 (its full units active, the rest frozen with slot 0's
// weights), replay iteration t0 + 1, load slot 1, replay t0 + 2, …, load slot W - 1: every unit is
// active and the state is the dense state after iteration t0 + W - 1, the same bits a dense
// snapshot of that iteration would hold. The steps after it are then run normally. Pure: no I/O,
// the training step is the caller's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "core/result.h"
#include "model/expert_replay.h"
#include "model/params.h"
#include "plan/schedule.h"

namespace sal::ckpt {

struct UnitCopy {
  bool full = false;              // weights and moments; else the compute weights only
  std::vector<float> w, m, v;     // m and v empty when !full
  uint64_t checksum = 0;          // unit_checksum() when taken
  size_t bytes() const { return (w.size() + m.size() + v.size()) * sizeof(float); }
};

// FNV-1a over the copy's floats, 64-bit words at a time (w, then m and v).
uint64_t unit_checksum(const UnitCopy& c);
// The same over an upstream log's parts (model/expert_replay.h): an expert's assignments (their
// counts per rank, holders and slots), a layer's tokens (k, inputs, gradients, weights).
uint64_t log_checksum(const model::SentRows& r);
uint64_t log_checksum(const model::TokenRows& t);

struct SparseSlot {
  uint64_t step = 0;      // taken after this iteration's update (0-based)
  uint32_t index = 0;     // its slot in the window
  double grad_norm = 0;   // the iteration's global gradient norm, before clipping
  std::map<UnitId, UnitCopy> units;
  size_t bytes() const;
};

// The slot iteration `step` takes under `s` (step mod period), or none.
std::optional<uint32_t> slot_of(const plan::CheckpointSchedule& s, uint64_t step);

// Slot `index`'s copies of `units` (those a worker writes): full state of slots[index]'s
// operators, compute weights of the later slots' (operator indices are positions in
// model_units(shape)). `reuse`: a dropped slot whose storage the copies go into (no allocation).
SparseSlot take_slot(const plan::CheckpointSchedule& s, uint32_t index, uint64_t step, double grad_norm,
                     const ModelShape& shape, const std::vector<const model::Unit*>& units, SparseSlot reuse = {});

// The units of `written` (those a worker writes) that slot `index` copies: those it or a later slot
// takes in full (a device copies only these).
std::vector<UnitId> slot_units(const plan::CheckpointSchedule& s, uint32_t index, const ModelShape& shape,
                               const std::vector<UnitId>& written);

// The slots a holder keeps: the `keep` newest complete windows and the one being filled. Adding
// the last slot of a window drops the windows older than those. (An agent keeps two: a writer's
// newest slot may die with it on the way, and the window before is then the one all writers
// share.)
class SparseWindows {
 public:
  explicit SparseWindows(plan::CheckpointSchedule s, size_t keep = 1) : schedule_(std::move(s)), keep_(keep) {}
  void add(SparseSlot slot);
  // The newest complete window, its slots in order (empty when none is complete).
  std::vector<const SparseSlot*> latest_complete() const;
  // Every complete window kept, newest first.
  std::vector<std::vector<const SparseSlot*>> complete_windows() const;
  size_t bytes() const;
  const plan::CheckpointSchedule& schedule() const { return schedule_; }
  // A superseded slot, for take_slot to copy into (empty when there is none).
  SparseSlot recycled();
  // Drops every slot but those of the `n` newest complete windows (a previous schedule's, once
  // the new one has windows of its own).
  void keep_newest(size_t n);
  // Test hook: the copy of `id` in the slot of `step` (to corrupt it), or null.
  UnitCopy* find(uint64_t step, const UnitId& id);

 private:
  uint64_t window_start(uint64_t step) const { return step - step % schedule_.period; }
  std::vector<const SparseSlot*> complete_at(uint64_t start) const;  // empty unless complete
  plan::CheckpointSchedule schedule_;
  size_t keep_ = 1;
  std::map<uint64_t, SparseSlot> slots_;  // by step
  std::vector<SparseSlot> spare_;          // superseded slots, their storage reused (at most a window)
};

// One writer's slots across plans: the windows under the schedule in force, and the complete
// windows under the schedule before it until the new one has `keep` complete windows of its own —
// only the newest of them once it has one (no gap in coverage when a plan, or the checkpoint
// policy, changes; and a writer's newest slot may die with it on its way, so with keep = 2 the
// window before stays there across a switch too: until 2026-12-01 the previous plan's were dropped
// as soon as the new plan's first window completed, and a writer killed before putting its second
// slot left no window every writer shared).
class SparseHolder {
 public:
  explicit SparseHolder(size_t keep = 1) : keep_(keep) {}
  // From now on, slots under `schedule` (a new window begins).
  void start(const plan::CheckpointSchedule& schedule);
  const plan::CheckpointSchedule* schedule() const { return current_ ? &current_->schedule() : nullptr; }
  void add(SparseSlot slot);
  SparseSlot recycled();  // SparseWindows::recycled of the schedule in force
  // The newest complete window (under the schedule in force, else the one before it).
  std::vector<const SparseSlot*> latest_complete() const;
  // Every complete window held, newest first (the schedule in force's, then the one before it).
  std::vector<std::vector<const SparseSlot*>> complete_windows() const;
  size_t bytes() const;
  UnitCopy* find(uint64_t step, const UnitId& id);  // test hook (SparseWindows::find)

 private:
  size_t keep_ = 1;
  std::unique_ptr<SparseWindows> current_, previous_;
};

// Runs one training iteration `step` on the params (forward, backward and the update of the
// units not frozen), clipping with `grad_norm`.
using ReplayStep = std::function<Status(uint64_t step, double grad_norm)>;

struct ReplayReport {
  uint64_t from_step = 0;            // the window's first iteration
  uint64_t to_step = 0;              // its last: the state is the dense state after it
  std::vector<size_t> frozen;        // units frozen in each replayed iteration
};

// A window replayed by a caller that runs the iterations itself (a worker in a mesh, whose steps
// the controller runs): begin() loads slot 0; for each iteration the window replays, norm_for()
// gives the recorded norm to clip with, and after() its update loads the slot taken after it. Once
// the last slot is loaded, done() and no unit is frozen. The same order of loads and steps as
// replay_window.
class WindowReplay {
 public:
  // Every unit `p` holds must be in the window (full in one slot); the copies' checksums are checked
  // as each slot is loaded.
  static Result<WindowReplay> begin(std::vector<SparseSlot> window, model::Params& p);
  std::optional<double> norm_for(uint64_t step) const;
  Status after(uint64_t step, model::Params& p);
  // Whether after(step) loads a slot (the next slot was taken after that iteration).
  bool loads_after(uint64_t step) const { return !done() && step == slots_[next_].step; }
  bool done() const { return next_ >= slots_.size(); }
  uint64_t from() const { return slots_.front().step; }
  uint64_t to() const { return slots_.back().step; }

 private:
  Status load(size_t i, model::Params& p);
  std::vector<SparseSlot> slots_;
  size_t next_ = 0;              // the next slot to load
  std::map<UnitId, bool> complete_;  // units loaded in full so far
};

// A window of one slot taken after the step the state of `p` already committed: loads `units` in
// full from it (each must be there in full; checksums checked), the others of `p` left as they are
// — they are that step's state already. What a survivor of a loss does when the window is its own
// step: it fetches only the units it did not hold.
Status load_from_slot(const SparseSlot& slot, model::Params& p, const std::set<UnitId>& units);

// Loads the window into `p` and replays it (above). Every unit `p` holds must be in the window
// (full in one slot); a copy whose checksum does not match is an error naming the unit and the
// slot's iteration. On return no unit is frozen.
Result<ReplayReport> replay_window(const std::vector<const SparseSlot*>& window, model::Params& p,
                                   const ReplayStep& step);

}  // namespace sal::ckpt
