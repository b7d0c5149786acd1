// compute.h — where a worker's parameters train, behind one interface for the Trainer (trainer.h):
// on the host (on_host.h: the Trainer's own model::Params and the CPU kernels) or on a GPU
// (on_device.h: a DeviceCompute — device_compute.h — with the host Params as the form units leave
// and arrive in). The Trainer never asks which one it has; what differs is here:
//
//   - units: the host Params are always the host compute's own; a device holds a copy, loaded
//     from them (load) and brought back down before they are read or replaced (to_host); a
//     re-plan in which only experts come and go brings down only the units it sends away and
//     moves only the experts that change (move_experts), the rest staying on the device;
//   - the step: the plan's exchange, the gradient sync and the global norm over the plan's data
//     plane (set_plan) — host memory, or a device data plane where every rank has a GPU of its own;
//   - snapshots: a dense snapshot's units as they are now, for the writer's thread (the host
//     copies at once; a device starts its copy, which the writer waits for); a sparse slot handed
//     to the snapshot thread (which reads the host units in place, the Trainer waiting before the
//     next update, or waits for the device's copy);
//   - a sparse window's replay: the units each slot loads on the host go where the step runs
//     (refresh_units);
//   - data-parallel groups (trainer_groups.cpp): the step's tokens cross the group's plane
//     (DevicePlan::group), the gradients are synchronised over a plane the Trainer names (the
//     plan's, or a patch's), and set aside and put back for a patch (backup_grads).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/writer.h"
#include "core/result.h"
#include "model/data.h"
#include "model/expert_replay.h"
#include "model/model.h"
#include "model/params.h"
#include "runtime/device_compute.h"
#include "runtime/sparse_snapshots.h"

namespace sal::runtime {

using HeldExperts = std::vector<std::pair<int, int>>;  // (layer, expert) per slot

class Compute {
 public:
  virtual ~Compute() = default;

  // Before the plan's data planes are replaced: lets go of the old plan's (DevicePlan's comm).
  virtual Status release() = 0;
  // Brings the host Params up to date with what the compute holds (before units leave or are
  // replaced, and before a save).
  virtual Status to_host() = 0;
  // The same for the units `ids` only (the units a re-plan sends to other ranks); the others may
  // stay behind on the host.
  virtual Status to_host(const std::vector<model::UnitId>& ids) = 0;
  // Whether the compute holds exactly the experts `held`, as loaded: a plan that moves nothing to
  // or from this rank and restores nothing then needs neither to_host() nor load().
  virtual bool holds(const HeldExperts& held) const = 0;
  // The host Params' non-expert units and experts `held` are what the compute trains from now on.
  virtual Status load(const HeldExperts& held) = 0;
  // As load() after a re-plan in which only experts came and went: the units the compute holds
  // that the plan keeps stay as they are (their host copies may be stale), the experts it no longer
  // holds go, and those it newly holds come from the host Params.
  virtual Status move_experts(const HeldExperts& held) { return load(held); }
  // The host Params' units `ids` changed there (a sparse window's replay loaded its next slot into
  // them): the compute takes their state, and whether they are frozen, from the host. Nothing to do
  // where the host Params are what the step runs on.
  virtual Status refresh_units(const std::vector<model::UnitId>& ids) {
    (void)ids;
    return {};
  }
  // The plan they train in (DevicePlan), after every load().
  virtual Status set_plan(const DevicePlan& plan) = 0;
  // What tells this compute's GPU apart across machines ("" : none; no device data plane).
  virtual std::string device_key() const = 0;
  virtual bool device_plane_ready() const = 0;

  virtual Status zero_grads() = 0;
  virtual Result<model::StepStats> step(const model::Batch& b, int64_t global_tokens) = 0;
  // Forward only over the plan's exchange: a validation batch's loss (model::MoeGpt::evaluate).
  virtual Result<model::StepStats> evaluate(const model::Batch& b, int64_t global_tokens) = 0;
  // The same over this rank's group's plane with the group's replicas (DevicePlan::group): a grouped
  // plan's validation once a patch has spent the plan's plane.
  virtual Result<model::StepStats> evaluate_in_group(const model::Batch& b, int64_t global_tokens) = 0;
  // With more than one rank: every non-expert unit's gradient over every rank, each expert of
  // `shared` among its holders (expert_grads.h).
  virtual Status sync_gradients(const std::vector<SharedExpert>& shared) = 0;
  // The global gradient norm, every expert once.
  virtual Result<double> grad_norm() = 0;
  // The same two over `comm` with `replicas` instead of the plan's (a grouped step's
  // synchronisation, over the plan's plane or a patch's).
  virtual Status sync_gradients_over(comm::Collectives& comm, const std::vector<SharedExpert>& shared) = 0;
  virtual Result<double> grad_norm_over(comm::Collectives& comm, const std::vector<Counts>& replicas) = 0;
  // A grouped step's gradients so far set aside, and put back (a patch starts its synchronisation
  // again from this rank's own contribution); restore fails when nothing of these units was set aside.
  virtual Status backup_grads() = 0;
  virtual Status restore_grads() = 0;
  virtual Status update(double lr, double grad_scale, int64_t t) = 0;
  // After update(): moe-llama's routing bias moved by the step's loads (model/router_bias.h).
  virtual Status balance_router(const model::RouterLoad& load) = 0;

  // `units` (the host Params' units this rank writes) as they are now, for a writer's thread.
  virtual Result<ckpt::SnapshotUnits> snapshot(const std::vector<const model::Unit*>& units) = 0;
  // The sparse slot of `step` (ckpt/sparse.h), of the units `written`, handed to the snapshot thread.
  virtual void put_slot(SparseSnapshots& sparse, uint64_t step, double grad_norm, const ModelShape& shape,
                        std::vector<const model::Unit*> written) = 0;

  // MoEtion's upstream logging (model/expert_replay.h): from the next zero_grads() on, each step's
  // dispatch to the experts is logged, and take_log() hands the step's log over (once). A compute
  // that cannot log gives none: a lost expert is then restored by the sparse rung instead.
  virtual void log_dispatch(bool on) { (void)on; }
  virtual std::optional<model::IterationLog> take_log() { return std::nullopt; }

  // Whether the host Params are the units trained (a CPU worker), so a unit's digest or a drill's
  // corruption can work on them between steps (trainer_digests.cpp); a device's are not.
  virtual bool units_on_host() const { return true; }

  // Any thread: ends the compute's own collective in flight (the plan's host plane is the
  // Trainer's to abort) until clear_abort().
  virtual void abort(const std::string& why) = 0;
  virtual void clear_abort() = 0;
};

}  // namespace sal::runtime
