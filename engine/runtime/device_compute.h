// device_compute.h — the Trainer's seam for where a worker's compute lives. A CPU worker has none:
// the Trainer computes on its host model::Params itself (trainer.cpp, unchanged). A GPU worker
// has a DeviceCompute (gpu_backend.h: one GPU, its Context, DeviceParams, model, exchange and
// optimizer) that holds the parameters the plan gives this rank and runs the step and the update;
// the Trainer's host Params stay the form for everything that leaves the worker or arrives
// (checkpoints, migration, restore), copied down with store() and up with load(). Snapshots do
// not go through them: begin_snapshot() starts a copy to the device's own host staging memory that
// overlaps the next step, and finish_snapshot() (on the snapshot writer's thread) waits for it.
//
// One rank only, for now: the step's experts are all local (no data plane) and the gradients need
// no reduction, so grad_norm() is the whole model's. A multi-worker GPU plan needs an NCCL
// DeviceExchange and gradient all-reduces on device pointers (docs/gpu.md, "Not built yet").
//
// Everything runs on the thread that created the object (the worker's training thread: CUDA's
// current device is per thread), except finish_snapshot(), which runs on any thread, concurrently
// with the others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/result.h"
#include "model/data.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"
#include "model/params.h"

namespace sal::runtime {

class DeviceCompute {
 public:
  virtual ~DeviceCompute() = default;

  // Replaces whatever the device held by host's non-expert units and the experts `held` (values
  // and Adam moments; gradients zero). Every expert in `held` must be in host.experts.
  virtual Status load(const model::Params& host, const std::vector<std::pair<int, int>>& held) = 0;
  // Copies the values and moments of every unit the device holds into host's unit of the same id
  // (which must exist; host may hold more). Waits for the device.
  virtual Status store(model::Params& host) = 0;

  virtual Status zero_grads() = 0;
  // Forward and backward on the local batch (global_tokens: the whole global batch's, the loss's
  // normaliser); gradients accumulate on the device. Waits for the device (the loss comes back).
  virtual Result<model::StepStats> step(const model::Batch& b, int64_t global_tokens) = 0;
  // sqrt of the sum of squares of every held unit's gradient.
  virtual Result<double> grad_norm() = 0;
  // AdamW with the gradients scaled by grad_scale: model::apply_adamw's lr, grad_scale and t
  // (1-based), with the optimizer settings the device was made with.
  virtual Status update(double lr, double grad_scale, int64_t t) = 0;

  // Snapshots, one at a time (the caller waits for finish_snapshot() before the next begin;
  // runtime::Trainer does). begin_snapshot() starts copying the values and moments of the units
  // `ids` (each held by the device) as they are after the updates so far, and returns without
  // waiting for the copy: steps go on meanwhile, and a later update() does not change the values
  // before the copy has read them. It fails, starting nothing, for a unit the device does not
  // hold, or while the previous snapshot is not finished.
  virtual Status begin_snapshot(const std::vector<model::UnitId>& ids) = 0;
  // Waits for the copy and returns the units (id, w, m, v; g empty) in begin_snapshot()'s order;
  // the snapshot is over either way. Called once per begin_snapshot() that succeeded, on any
  // thread; the object outlives the call.
  virtual Result<std::vector<model::Unit>> finish_snapshot() = 0;
};

// Opens GPU `ordinal` for a worker; the error says why it cannot (no such GPU, no driver).
using DeviceFactory =
    std::function<Result<std::unique_ptr<DeviceCompute>>(int ordinal, const model::OptimConfig& optim)>;

}  // namespace sal::runtime
