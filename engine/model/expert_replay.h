// expert_replay.h — MoEtion's upstream logging, for experts: what each worker dispatched to each
// expert in one iteration (the rows, and the output gradients it sent back for them), and the
// replay that rebuilds a lost expert's updates from those logs alone.
//
// An expert's weight gradient in a step is a function of its weights and of two things that cross
// its all-to-all: the input rows the senders dispatch to it and the output gradients they return
// for those rows. The exchange (runtime/distributed_exchange.h) records both, per expert, in the
// order the rows left the sender, with how many went to each rank of the plan and which ranks held
// the expert. From every sender's record of an iteration the replay rebuilds each holder's block
// exactly as the exchange built it (rows from sender 0, then sender 1, …; the sender's rows to that
// holder in its order), runs the expert's forward (recomputing the activations) and backward on it,
// pass by pass, sums the holders' gradients as the gradient sync does (ascending holders, from +0),
// clips with the norm the run recorded and applies AdamW with that step's learning rate. Starting
// from the expert's full state after iteration s, replaying s+1, s+2, … gives the state the run
// reached, bit for bit: the same floats through the same kernels in the same order. Pure: no I/O.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <vector>

#include "core/result.h"
#include "model/optimizer.h"
#include "model/params.h"

namespace sal::model {

// One sender's rows for one expert in one pass: `to[r]` of them went to rank r (consecutive, in
// rank order), `holders` the ranks that held the expert (ascending), x and dy [rows, d].
struct SentRows {
  std::vector<uint32_t> to;
  std::vector<uint32_t> holders;
  std::vector<float> x, dy;
  size_t rows(int d) const { return d > 0 ? x.size() / size_t(d) : 0; }
  size_t bytes() const { return (x.size() + dy.size()) * sizeof(float) + (to.size() + holders.size()) * 4; }
};

struct LogKey {
  uint32_t pass = 0;  // the micro-batch pass (0 when the share is one pass)
  int layer = 0, expert = 0;
  auto operator<=>(const LogKey&) const = default;
};

// What one sender dispatched in one iteration (every expert it sent rows to, every pass).
struct IterationLog {
  std::map<LogKey, SentRows> rows;
  size_t bytes() const;
  void clear() { rows.clear(); }
};

// One iteration of the expert `u` (its state after the iteration before) from `senders`, every
// rank's log of that iteration in the plan's rank order: its gradient rebuilt, clipped with
// `grad_norm` (the run's global norm of that iteration), and the update of iteration `step` applied.
// Errors when the logs disagree (row counts that do not add up to what a holder received, a
// holder list that differs between senders, rows of the wrong width), naming the sender.
Status replay_expert_step(const Dims& d, Unit& u, const OptimConfig& c, uint64_t step, double grad_norm,
                          const std::vector<const IterationLog*>& senders);

}  // namespace sal::model
