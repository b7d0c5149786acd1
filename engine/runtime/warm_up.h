// warm_up.h — a new CPU worker's first pass, made while it waits for a plan. A process's first
// training step is far slower than its next ones, and that step is the first step of the plan that
// takes the worker in, which in a recovery is the step the job waits for (docs/performance.md, "A
// new worker's first step"). Most of it is the heap growing: every page of the step's buffers is
// faulted in one by one (about 11 us a page on a virtual machine, 90 ms of CPU for 32 MiB). So the
// warm-up first faults in the heap a step will need (an estimate, heap_reserve_bytes, at most what
// the heap keeps: core/heap.h) in blocks it frees again, which the step then takes; then, while no
// plan has come, one forward, backward and AdamW update of a small copy of the job's model (its own
// units, every expert held here) on the largest share of the global batch a worker computes,
// through the runtime's exchange over a data plane of this worker alone (the code, the BLAS
// buffers, the rest). It never touches the job's state (the units, the data position, the random
// streams), and it stops between heap blocks, layers and experts as soon as `stop` says so (the
// worker has a request to handle), so a plan waits at most one block or one expert's work of it.
#pragma once

#include <cstddef>
#include <functional>

#include "core/result.h"
#include "model/data.h"
#include "runtime/train_spec.h"

namespace sal::runtime {

// What a warm-up did: the sequences of its batch, the heap it faulted in, its wall time, and
// whether it ran to the end.
struct WarmUpDone {
  int sequences = 0;
  size_t heap_bytes = 0;
  double ms = 0;
  bool finished = false;
};

// The heap is faulted in blocks of this size: below glibc's mmap threshold, so each comes from the
// heap and goes back to it (core/heap.h keeps what is freed).
constexpr size_t kHeapBlock = size_t(1) << 20;

// The heap a step on `sequences` sequences of a model of `d` allocates, estimated: every unit's
// weights, gradient and moments, and what a step keeps for its backward pass, per token and layer
// the attention's scores, top_k experts' hidden layers (before and after the activation, and their
// gradients) and eight d-wide vectors. Drill8's share (16 sequences of d 64, 4 experts a layer):
// 28 MiB. There a reserve of 32 MiB alone made a new worker's first step cost what its next ones
// do (17-19 ms of CPU against 57-74 without a warm-up); one of 16 MiB did half of that.
size_t heap_reserve_bytes(const model::Dims& d, int sequences);

// The warm-up of a worker of `spec` (spec.warm_up_sequences > 0; a CPU device) on `corpus`.
// An error only where the pass itself failed (the caller logs it and trains on: nothing depends
// on a warm-up).
Result<WarmUpDone> warm_up(const TrainSpec& spec, const model::Corpus& corpus, const std::function<bool()>& stop);

}  // namespace sal::runtime
