// expert_replay.h — MoEtion's upstream logging, for experts: what each worker dispatched to each
// expert in one iteration (the rows, and the output gradients it sent back for them), and the
// replay that rebuilds a lost expert's updates from those logs alone.
//
// An expert's weight gradient in a step is a function of its weights and of two things that cross
// its all-to-all: the input rows the senders dispatch to it and the output gradients they return
// for those rows. The exchange (runtime/distributed_exchange.h) records both — per layer each
// token's input row and combine gradient once, per expert the assignments in the order they left
// the sender, with how many went to each rank of the plan and which ranks held the expert. From
// every sender's record of an iteration the replay rebuilds each holder's block
// exactly as the exchange built it (rows from sender 0, then sender 1, …; the sender's rows to that
// holder in its order), runs the expert's forward (recomputing the activations) and backward on it,
// pass by pass, sums the holders' gradients as the gradient sync does (ascending holders, from +0),
// clips with the norm the run recorded and applies AdamW with that step's learning rate. A pass that
// shadowed the expert (runtime/shadows.h: each rank computed its own tokens of it) shows in the logs
// as rows a rank that holds no replica sent to itself; the replay computes each such shadow's
// gradient as that rank did and adds it at the expert's source, its lowest holder, in rank order, as
// the exchange does. Starting
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

// One layer's tokens of one pass as a sender logged them, each once whatever its k experts: its
// input row x [tokens, d], the gradient its k experts' outputs got back through the combine dy
// [tokens, d], and each assignment's combine weight w [tokens * k]. The output gradient the sender
// returned for assignment slot s is w[s] * dy[s / k] (model/moe_layer.h's combine_backward), the
// input row it dispatched x[s / k]: a log holds each token's two rows once instead of k times.
struct TokenRows {
  int k = 0;
  std::vector<float> x, dy, w;
  uint64_t checksum = 0;  // as the sender took it (ckpt::log_checksum); 0: not yet
  size_t bytes() const { return (x.size() + dy.size() + w.size()) * sizeof(float); }
};

// One sender's assignments to one expert in one pass: their slots in the order they left (`to[r]`
// of them to rank r, consecutive, in rank order), and `holders`, the ranks that held the expert.
struct SentRows {
  std::vector<uint32_t> to;
  std::vector<uint32_t> holders;
  std::vector<uint32_t> slots;
  uint64_t checksum = 0;  // as the sender took it (ckpt::log_checksum); 0: not yet
  size_t bytes() const { return (to.size() + holders.size() + slots.size()) * sizeof(uint32_t); }
};

struct LogKey {
  uint32_t pass = 0;  // the micro-batch pass (0 when the share is one pass)
  int layer = 0, expert = 0;
  auto operator<=>(const LogKey&) const = default;
};
using TokenKey = std::pair<uint32_t, int>;  // (pass, layer)

// What one sender dispatched in one iteration (every expert it sent rows to, every pass).
struct IterationLog {
  std::map<LogKey, SentRows> rows;
  std::map<TokenKey, TokenRows> tokens;
  size_t bytes() const;
  void clear() {
    rows.clear();
    tokens.clear();
  }
};

// One iteration of the expert `u` (its state after the iteration before) from `senders`, every
// rank's log of that iteration in the plan's rank order: its gradient rebuilt, clipped with
// `grad_norm` (the run's global norm of that iteration), and the update of iteration `step` applied.
// Errors when the logs disagree (counts that do not add up to the slots logged, a holder list that
// differs between senders, a slot past the tokens logged, a layer's tokens without their
// gradients), naming the sender.
Status replay_expert_step(const Dims& d, Unit& u, const OptimConfig& c, uint64_t step, double grad_norm,
                          const std::vector<const IterationLog*>& senders);

}  // namespace sal::model
