// warm_up.cpp — see warm_up.h.
#include "runtime/warm_up.h"

#include <gloo/rendezvous/hash_store.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "comm/collectives.h"
#include "core/clock.h"
#include "core/heap.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "runtime/distributed_exchange.h"

namespace sal::runtime {

namespace {

// The job's model with `experts` experts a layer (the warm-up's units, all held here): the same
// operators and sizes a step of the job runs, its expert blocks no smaller.
model::Dims warm_up_dims(const TrainSpec& spec) {
  model::Dims d = spec.dims;
  d.experts = std::clamp(spec.warm_up_experts, d.top_k, spec.dims.experts);
  d.hot_experts = std::min(d.hot_experts, d.experts);
  return d;
}

// Faults in about `bytes` of the heap, a block at a time (a write to each page), asking `stop`
// before each block and once after the last, then frees the blocks, which the heap keeps. The
// bytes faulted in; *stopped: whether `stop` said so.
size_t fault_in_heap(size_t bytes, const std::function<bool()>& stop, bool* stopped) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<void*> blocks;
  size_t done = 0;
  while (!(*stopped = stop()) && done < bytes) {
    void* b = std::malloc(kHeapBlock);
    if (!b) break;
    blocks.push_back(b);
    auto* p = static_cast<volatile char*>(b);
    for (size_t i = 0; i < kHeapBlock; i += page) p[i] = 0;
    done += kHeapBlock;
  }
  for (void* b : blocks) std::free(b);
  return done;
}

}  // namespace

size_t heap_reserve_bytes(const model::Dims& d, int sequences) {
  size_t params = 0;
  for (const UnitId& id : model_units(d)) params += unit_size(d, id.kind);
  const size_t per_token_layer = size_t(d.heads) * size_t(d.seq_len) + 4 * size_t(d.top_k) * size_t(d.ffn()) +
                                 8 * size_t(d.d);
  const size_t tokens = size_t(std::max(sequences, 0)) * size_t(d.seq_len);
  return 4 * (4 * params + tokens * size_t(d.layers) * per_token_layer);
}

Result<WarmUpDone> warm_up(const TrainSpec& spec, const model::Corpus& corpus, const std::function<bool()>& stop) {
  const int64_t t0 = mono_ns();
  WarmUpDone done;
  done.sequences = spec.micro_batch > 0 ? std::min(spec.micro_batch, spec.warm_up_sequences) : spec.warm_up_sequences;
  if (done.sequences <= 0) return done;
  const model::Dims d = warm_up_dims(spec);
  bool stopped = false;
  const size_t reserve = std::min(heap_reserve_bytes(d, done.sequences), kKeptHeapBytes);  // the rest would go back
  done.heap_bytes = fault_in_heap(reserve, stop, &stopped);
  done.ms = double(mono_ns() - t0) / 1e6;
  if (stopped) return done;
  model::Params params = model::Params::create(d, spec.seed, model::Params::all_experts(d));
  auto net = model::make_model(params);
  // The runtime's exchange over a data plane of this worker alone: the dispatch, the packing and
  // the all-to-alls' buffers are the ones a step allocates.
  gloo::rendezvous::HashStore store;
  comm::GlooOptions o;
  o.prefix = "warm-up";
  o.hostname = spec.data_host;
  o.verify_counts = false;
  auto plane = comm::connect_gloo(o, store);
  if (!plane) return plane.error().with_context("warm-up data plane");
  const std::vector<Counts> replicas(size_t(d.layers), Counts(size_t(d.experts), {1u}));  // held by reference
  DistributedExchange dx(**plane, params, replicas);
  dx.split = spec.dispatch;
  dx.stopping = stop;
  const model::Batch b = model::make_batch(corpus, spec.seed, 0, 0, done.sequences, d.seq_len);
  auto st = net->step(b, int64_t(done.sequences) * d.seq_len, dx);
  if (!st && !dx.stopped()) return st.error().with_context("warm-up pass");
  if (st) model::apply_adamw(params, spec.optim, spec.optim.lr, 1.0, 1);
  done.finished = bool(st);
  done.ms = double(mono_ns() - t0) / 1e6;
  return done;
}

}  // namespace sal::runtime
