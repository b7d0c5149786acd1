// train_spec.h — what a worker needs to know to train: the model's shape, the data, the optimizer
// and the batch. The worker gets the job file's text from the controller and turns it into this
// (cmd_worker does, with engine/job), so the runtime does not depend on job files. The device is
// the worker's own (the agent gives each worker one), not the job's.
#pragma once

#include <cstdint>
#include <string>

#include "model/dims.h"
#include "model/optimizer.h"
#include "runtime/dispatch.h"

namespace sal::runtime {

struct TrainSpec {
  model::Dims dims;
  std::string data_path;
  std::string data_format = "bytes";
  std::string routing_trace;  // model.routing_trace, resolved (empty: the gate routes)
  int64_t routing_every = 1;  // steps per trace file
  Split dispatch = Split::even;  // train.dispatch: how each expert's tokens are split over its replicas
  bool shadow_experts = false;   // train.shadow_experts: crowded experts computed where their tokens are
  model::OptimConfig optim;
  int global_batch = 16;  // sequences per step, over all workers
  int micro_batch = 0;    // train.micro_batch: sequences per forward and backward pass (0: the whole share)
  uint64_t seed = 1;
  int threads = 1;        // BLAS threads per worker
  std::string data_host = "127.0.0.1";  // this worker's data-plane address (the agent decides)
  std::string device = "cpu:0";         // where this worker computes: "cpu:N", or "cuda:N" (GPU N)
  bool snapshots = true;                // the job takes dense snapshots (train.checkpoint_every > 0)
  bool expert_logs = false;             // train.expert_logs: each step's dispatch logged to the slice peers
  uint32_t log_copies = 0;              // train.log_copies: to the first this many of them (0: every one)
  int64_t digest_every = 1;             // digests of the held units every this many steps (0: none)
  bool fault_injection = false;         // the job allows a drill's corrupt{} (faults.inject)
  double validation = 0;                // data.validation: the corpus's last part held out
  int64_t eval_every = 0;               // train.eval_every: steps between validation losses (0: none)
  int eval_sequences = 0;               // train.eval_sequences: the validation set's sequences
  // The warm-up pass a new CPU worker makes while it waits for a plan (warm_up.h): sequences of
  // its batch (0: none; train.warm_up: the share of one of the fewest workers that hold every
  // expert once, experts / policies.slots, at most mesh.nodes) and experts of its model's layers
  // (policies.slots: what a worker holds).
  int warm_up_sequences = 0;
  int warm_up_experts = 0;
  // CURVE towards a rendezvous store that is not local: the controller's public key (Z85) and this
  // node's key file (the agent's --server-key and --key). Empty: local stores only.
  std::string server_key;
  std::string key_file;
  // The job's secret for sparse snapshot slices (JobSpec.slice_mac_key, hex; ckpt/slice_mac.h):
  // the slots this worker puts carry its MAC, and those it fetches must.
  std::string slice_mac_key;
};

}  // namespace sal::runtime
