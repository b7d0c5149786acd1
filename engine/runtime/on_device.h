// on_device.h — a GPU worker's compute (compute.h): a DeviceCompute (device_compute.h, the GPU
// plugin's) with the Trainer's host model::Params as the form units leave and arrive in. It keeps
// what the device holds apart from the host: the experts it loaded (a plan that changes nothing
// for this rank keeps them there, with no download or upload), and whether its updates are newer
// than the host Params (to_host() then downloads them).
//
// Snapshots, dense or sparse, are the device's: begin_snapshot() starts a copy to its host staging
// memory that overlaps the next step, and the units returned wait for it on the thread that takes
// them (the writer's, the snapshot thread) and lend that memory until they are dropped. As many at
// a time as the device has staging slots: one more waits until a slot is given back (its units
// dropped, or never taken). Units taken after this object is gone fail instead of reaching a
// closed device.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "runtime/compute.h"

namespace sal::runtime {

class OnDevice final : public Compute {
 public:
  // `name` ("cuda:0") names the device in errors.
  OnDevice(std::unique_ptr<DeviceCompute> device, model::Params& host, std::string name);
  ~OnDevice() override;

  Status release() override;
  Status to_host() override;
  Status to_host(const std::vector<model::UnitId>& ids) override;
  bool holds(const HeldExperts& held) const override;
  Status load(const HeldExperts& held) override;
  Status move_experts(const HeldExperts& held) override;
  Status refresh_units(const std::vector<model::UnitId>& ids) override;
  Status set_plan(const DevicePlan& plan) override;
  std::string device_key() const override { return device_->device_key(); }
  bool device_plane_ready() const override { return device_->device_plane_ready(); }
  bool units_on_host() const override { return false; }

  Status zero_grads() override { return device_->zero_grads(); }
  Result<model::StepStats> step(const model::Batch& b, int64_t global_tokens) override;
  // (the CUDA model has no forward-only pass yet: a job that evaluates runs on CPU workers)
  Result<model::StepStats> evaluate(const model::Batch&, int64_t) override {
    return fail("validation (train.eval_every) runs on CPU workers only: ", name_, " does not evaluate yet");
  }
  Result<model::StepStats> evaluate_in_group(const model::Batch& b, int64_t global_tokens) override {
    return evaluate(b, global_tokens);
  }
  Status sync_gradients(const std::vector<SharedExpert>& shared) override { return device_->sync_gradients(shared); }
  Result<double> grad_norm() override { return device_->grad_norm(); }
  Status sync_gradients_over(comm::Collectives& comm, const std::vector<SharedExpert>& shared) override {
    return device_->sync_gradients_over(comm, shared);
  }
  Result<double> grad_norm_over(comm::Collectives& comm, const std::vector<Counts>& replicas) override {
    return device_->grad_norm_over(comm, replicas);
  }
  Status backup_grads() override { return device_->backup_grads(); }
  Status restore_grads() override { return device_->restore_grads(); }
  Status update(double lr, double grad_scale, int64_t t) override;
  // (moe-llama's routing bias is not built on GPU workers: the job schema refuses model.bias_update there)
  Status balance_router(const model::RouterLoad& load) override {
    if (load.empty()) return {};
    return fail("the routing bias (model.bias_update) is balanced on CPU workers only: ", name_, " has none");
  }

  Result<ckpt::SnapshotUnits> snapshot(const std::vector<const model::Unit*>& units) override;
  void put_slot(SparseSnapshots& sparse, uint64_t step, double grad_norm, const ModelShape& shape,
                std::vector<const model::Unit*> written) override;

  // (Frozen units run on the device: their weight gradient is computed and left out of the norm
  // and the update, OptimizerCuda; refresh_units() brings each replayed slot's state.)
  void abort(const std::string& why) override { device_->abort(why); }
  void clear_abort() override { device_->clear_abort(); }

 private:
  struct Gate;
  class Pending;
  Result<ckpt::SnapshotUnits> copy(const std::vector<model::UnitId>& ids);

  std::unique_ptr<DeviceCompute> device_;
  model::Params& host_;
  std::string name_;
  std::shared_ptr<Gate> gate_;     // the snapshots in flight, shared with the units they returned
  bool newer_ = false;             // the device has committed updates the host lacks
  std::set<std::pair<int, int>> held_;  // the experts the last load() gave it ({}: none)
};

}  // namespace sal::runtime
