// warm_up.h — a new CPU worker's first pass, made while it waits for a plan: one forward, backward
// and AdamW update of a small copy of the job's model (its own units, every expert held here) on
// the largest share of the global batch a worker computes, through the runtime's exchange over a
// data plane of this worker alone (the buffers a step allocates). A process's first training step is
// far slower than its next ones — its heap grows, its code, its BLAS buffers and its pages fault
// in one by one — and that step is the first step of the plan that takes the worker in, which in
// a recovery is the step the job waits for (docs/performance.md, "A new worker's first step").
// The warm-up pays for it before the worker is needed. It never touches the job's state (the
// units, the data position, the random streams), and it stops between layers as soon as `stop`
// says so (the worker has a request to handle), so a plan waits at most one layer of it.
#pragma once

#include <functional>

#include "core/result.h"
#include "model/data.h"
#include "runtime/train_spec.h"

namespace sal::runtime {

// What a warm-up did: the sequences of its batch, its wall time, and whether it ran to the end.
struct WarmUpDone {
  int sequences = 0;
  double ms = 0;
  bool finished = false;
};

// The warm-up of a worker of `spec` (spec.warm_up_sequences > 0; a CPU device) on `corpus`.
// An error only where the pass itself failed (the caller logs it and trains on: nothing depends
// on a warm-up).
Result<WarmUpDone> warm_up(const TrainSpec& spec, const model::Corpus& corpus, const std::function<bool()>& stop);

}  // namespace sal::runtime
