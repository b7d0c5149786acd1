// checkpointing.h — the checkpoint models a strategy restores from, as time costs:
//   none      nothing saved: a restore goes back to step 0
//   dense     the whole state every `every` steps, blocking for its write (store or host memory)
//   oracle    dense, at the interval that is optimal for the strategy's true mean time between
//             restores (Gemini-style: the oracle knows the failure rate); T* = Ts + √(Ts² + 2 Ts (Tf + Tr))
//   moc       MoC-style partial: non-expert state plus `fraction` of the experts (round robin) every
//             `every` steps; restores go back to the last one (the experts not in it are older —
//             an accuracy cost the time model does not count)
//   moetion   MoEtion's sparse window: the checkpoint policy (policies/checkpoint/moetion.lua by
//             default, through the real policy slot) chooses W_sparse from the model's operators;
//             each iteration snapshots its share to host memory, overlapped with compute except the
//             part that exceeds the iteration; a restore replays the last complete window with frozen
//             operators (replay_cost of an iteration each) and re-executes from there, so at most
//             2·W_sparse iterations are redone.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "sim/scenario.h"

namespace sal::sim {

class Workload;

struct RestorePoint {
  int64_t step = 0;        // committed steps after the restore
  double replay_s = 0;     // extra time before training resumes (reading state, replaying)
};

class CheckpointModel {
 public:
  // `mtbr_s`: the strategy's mean time between restores (oracle only); `iter_s`: a fault-free
  // step on the full cluster (moetion's budget, oracle's interval in steps).
  static Result<CheckpointModel> make(const StrategySpec& spec, const Scenario& s, const Workload& w,
                                      double iter_s, double mtbr_s);

  // Blocking time after committing `step` (0 when it is not a checkpoint step).
  double cost_after(int64_t step, double step_s) const;
  // Where a restore at `step` (the next step to run) goes back to, and what it costs to get there.
  RestorePoint restore(int64_t step, double step_s) const;

  int64_t interval() const { return every_; }  // steps between checkpoints (moetion: W_sparse)
  std::string describe() const;

 private:
  CheckpointSpec spec_;
  int64_t every_ = 0;
  double write_s_ = 0;   // blocking time of one checkpoint
  double read_s_ = 0;    // time to load one back
  double moetion_overrun_s_ = 0;  // moetion: the part of a snapshot that does not fit in its iteration
};

}  // namespace sal::sim
