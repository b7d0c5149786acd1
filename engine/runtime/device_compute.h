// device_compute.h — what a GPU gives a worker: the GPU plugin's side of the Trainer's compute
// (compute.h; on_device.h adapts a DeviceCompute to it, as on_host.h does the CPU). A GPU worker
// has a DeviceCompute (gpu_backend.h: one GPU, its Context, DeviceParams, model, exchange and
// optimizer) that holds the parameters the plan gives this rank and runs the step and the update;
// the Trainer's host Params stay the form for everything that leaves the worker or arrives
// (checkpoints, migration, restore), copied up with store() and down with load(). Snapshots do
// not go through them: begin_snapshot() starts a copy to the device's own host staging memory that
// overlaps the next step, and finish_snapshot() (on the snapshot writer's thread) waits for it and
// lends that memory until the writer is done with it.
//
// The plan's ranks: set_plan() hands the device the plan's data plane (comm::Collectives on host
// memory, Gloo) and its placement. With more than one rank the step's experts are exchanged over
// it, sync_gradients() reduces the gradients as the CPU Trainer does, and grad_norm() is the
// global norm (one more all-reduce); with one rank everything is local. Several workers can so
// share one GPU, and GPU and CPU workers one plan. When every rank of the plan is a GPU worker on
// a GPU of its own (the Trainer all-gathers device_key() over the host plane: all_own_devices()),
// the plan also names a device data plane: the device connects it (NCCL, one communicator per
// plan) and moves the expert rows and the gradients over it, device to device; the small host
// values (counts, statistics, the norm) stay on the host plane.
//
// Everything runs on the thread that created the object (the worker's training thread: CUDA's
// current device is per thread), except finish_snapshot(), abort() and clear_abort(), which run
// on any thread, concurrently with the others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "model/data.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"
#include "model/params.h"
#include "runtime/dispatch.h"
#include "runtime/expert_grads.h"

namespace sal::comm {
class StoreClient;
}

namespace sal::runtime {

// What set_plan() hands the device after every load().
struct DevicePlan {
  // The plan's host data plane (this rank is comm->rank() of comm->size()); null: one rank.
  comm::Collectives* comm = nullptr;
  std::vector<Counts> replicas;           // [layer] = R[e][rank], as DistributedExchange takes it
  Split split = Split::even;              // train.dispatch: how each expert's tokens are split over its replicas
  bool shadows = false;                   // train.shadow_experts (the host's compute)
  std::function<void()> before_alltoall;  // may be empty: called before every all-to-all (a drill's fault point)
  std::function<void()> before_backward;  // may be empty: as each MoE layer's backward begins (the host's compute calls it)
  // Non-empty when every rank has a GPU of its own: the device data plane to connect through
  // `store` under this prefix, which then carries the rows and the gradients.
  std::string device_prefix;
  comm::StoreClient* store = nullptr;
  // With device_prefix: keep the device plane the device holds instead of connecting one (the
  // plan has the same ranks on the same GPUs as that plane's, and every rank's plane is ready:
  // the Trainers agreed on it).
  bool reuse_device_plane = false;
  // A grouped plan (parallel.groups > 1): the step's tokens cross this rank's group's data plane
  // (host memory; a group of one rank: none), with the group's replica table; `comm` and
  // `replicas` serve the gradient sync and the norm over every rank. Null: the step crosses `comm`.
  comm::Collectives* group = nullptr;
  std::vector<Counts> group_replicas;
};

// True when there are two or more keys, none empty and no two equal: every rank of the plan has a
// GPU that no other rank uses (so a device data plane, which takes one rank per GPU, can form).
inline bool all_own_devices(const std::vector<std::string>& keys) {
  if (keys.size() < 2) return false;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty()) return false;
    for (size_t j = 0; j < i; ++j)
      if (keys[i] == keys[j]) return false;
  }
  return true;
}

class DeviceCompute {
 public:
  virtual ~DeviceCompute() = default;

  // Replaces whatever the device held by host's non-expert units and the experts `held` (values
  // and Adam moments; gradients zero). Every expert in `held` must be in host.experts.
  virtual Status load(const model::Params& host, const std::vector<std::pair<int, int>>& held) = 0;
  // Copies the values and moments of every unit the device holds into host's unit of the same id
  // (which must exist; host may hold more). Waits for the device.
  virtual Status store(model::Params& host) = 0;
  // The same for the units `ids` only (each held on both sides): the units a re-plan sends away.
  virtual Status store_units(model::Params& host, const std::vector<model::UnitId>& ids) = 0;
  // After a load(), where only experts came and went: keeps every unit the device holds that
  // `held` keeps (non-expert units and experts alike, as they are on the device), drops the
  // experts `held` lacks, and uploads the experts it newly holds from host (values and moments;
  // gradients zero). Every expert in `held` that the device lacks must be in host.experts.
  virtual Status move_experts(const model::Params& host, const std::vector<std::pair<int, int>>& held) = 0;

  // Copies the values, moments and frozen flags of host's units `ids` into the device's (each must
  // be held on both sides), without reloading anything else: the state a sparse window's replay
  // loaded on the host. Waits for the device.
  virtual Status upload_units(const model::Params& host, const std::vector<model::UnitId>& ids) = 0;

  // The plan the units of the last load() train in, after every load() (DevicePlan). plan.comm
  // and plan.store must stay alive until the next load(), the next set_plan() or the object's
  // end, whichever comes first; the Trainer calls set_plan({}) before it replaces or drops them.
  // With a device_prefix this connects the device data plane (every rank of the plan at once) or
  // reuses the one it holds, and fails, naming it, when it cannot. The device plane outlives
  // set_plan({}) and load() while it is ready; a set_plan() with a comm and no device_prefix, or
  // one that does not reuse it, drops it. set_plan({}) before any load() does nothing; with a comm it
  // fails then.
  virtual Status set_plan(const DevicePlan& plan) = 0;
  // What tells this device's GPU apart across processes and machines (its UUID); empty when a
  // device data plane is not to be used (it is then never asked to connect one).
  virtual std::string device_key() const = 0;
  // Holds a device data plane that has not failed nor been aborted: it can serve a next plan of
  // the same ranks (DevicePlan::reuse_device_plane). A plane that is not ready is dropped by the
  // next set_plan().
  virtual bool device_plane_ready() const = 0;
  // Any thread: ends the device data plane's call or connect in flight (it returns an error) and
  // makes every later connect fail until clear_abort(). The host plane is the Trainer's to abort.
  virtual void abort(const std::string& why) = 0;
  virtual void clear_abort() = 0;

  virtual Status zero_grads() = 0;
  // Forward and backward on the local batch (global_tokens: the whole global batch's, the loss's
  // normaliser); gradients accumulate on the device. Waits for the device (the loss comes back).
  virtual Result<model::StepStats> step(const model::Batch& b, int64_t global_tokens) = 0;
  // After step(), with more than one rank: the gradients summed as Trainer::sync_gradients does
  // (every non-expert unit over every rank, each expert of `shared` among its holders). Nothing
  // with one rank.
  virtual Status sync_gradients(const std::vector<SharedExpert>& shared) = 0;
  // One rank: sqrt of the sum of squares of every held unit's gradient. More (after
  // sync_gradients()): the global norm as Trainer::global_norm computes it, every expert once
  // (one all-reduce).
  virtual Result<double> grad_norm() = 0;
  // sync_gradients() and grad_norm() over `comm` with `replicas` instead of the plan's (a grouped
  // step's synchronisation over the plan's plane or a patch's; host memory).
  virtual Status sync_gradients_over(comm::Collectives& comm, const std::vector<SharedExpert>& shared) = 0;
  virtual Result<double> grad_norm_over(comm::Collectives& comm, const std::vector<Counts>& replicas) = 0;
  // Every held unit's gradient copied aside on the device, and back (a grouped step's patch);
  // restore fails when the units are not those of the last backup.
  virtual Status backup_grads() = 0;
  virtual Status restore_grads() = 0;
  // AdamW with the gradients scaled by grad_scale: model::apply_adamw's lr, grad_scale and t
  // (1-based), with the optimizer settings the device was made with.
  virtual Status update(double lr, double grad_scale, int64_t t) = 0;

  // Snapshots, at most snapshot_slots() at a time: a snapshot holds a slot from begin_snapshot()
  // until its finish_snapshot() has failed or the views it returned are dropped (runtime::OnDevice
  // waits for a free slot before it begins one). begin_snapshot() starts copying the values and
  // moments of the units `ids` (each held by the device) as they are after the updates so far, and
  // returns its ticket without waiting for the copy: steps go on meanwhile, and a later update()
  // does not change the values before the copy has read them. It fails, starting nothing, for a
  // unit the device does not hold, or when no slot is free.
  virtual Result<uint64_t> begin_snapshot(const std::vector<model::UnitId>& ids) = 0;
  // Waits for the copy of `ticket` and returns its units in begin_snapshot()'s order, as views
  // into the device's host staging memory, valid until the result's keep is dropped. Called once
  // per ticket, on any thread; the views may outlive the object.
  virtual Result<model::UnitViews> finish_snapshot(uint64_t ticket) = 0;
  virtual int snapshot_slots() const { return 1; }
};

// What a device is opened with.
struct DeviceOptions {
  model::OptimConfig optim;  // AdamW's settings for update()
  // The job takes snapshots (train.checkpoint_every > 0): the device reserves their host staging
  // memory up front, so the first one does not pause training to allocate it. Without, a snapshot
  // asked for anyway allocates it then.
  bool snapshots = true;
};

// Opens GPU `ordinal` for a worker; the error says why it cannot (no such GPU, no driver).
using DeviceFactory = std::function<Result<std::unique_ptr<DeviceCompute>>(int ordinal, const DeviceOptions& options)>;

}  // namespace sal::runtime
