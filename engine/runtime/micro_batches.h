// micro_batches.h — gradient accumulation (train.micro_batch): a rank's share of a step's global
// batch computed a few sequences at a time, the gradients of the passes adding up in the units
// before the one synchronisation and update of the step. The global batch (which sequences, a pure
// function of seed and step) and the reduction over the ranks do not change, so neither do the
// failure semantics: a step is still committed whole or not at all.
//
// Every pass of the step's forward and backward is collective (each MoE layer's routing statistics
// and its all-to-all), so every rank runs as many passes as the rank with the largest share needs:
// pass i takes sequences [i·m, (i+1)·m) of each rank's share, empty where a share runs out. The
// balancing loss of a pass is over the tokens of that pass, on every rank together, weighted by
// their share of the global batch, so the passes' losses add up to one step's.
#pragma once

#include <cstdint>
#include <vector>

namespace sal::runtime {

struct MicroPass {
  int first = 0;        // this rank's sequences of the global batch: [first, first + count)
  int count = 0;        // 0: an empty pass (its collectives only)
  double aux_share = 1;  // the pass's sequences on every rank over the global batch
};

// The passes of rank `rank` of `ranks` for a global batch of `global` sequences split by `shares`
// (model::batch_share's thousandths; empty: even), `micro` sequences at a time (0: one pass of the
// whole share).
std::vector<MicroPass> micro_passes(int global, const std::vector<uint32_t>& shares, int ranks, int rank, int micro);

}  // namespace sal::runtime
