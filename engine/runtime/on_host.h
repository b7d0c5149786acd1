// on_host.h — a CPU worker's compute (compute.h): the Trainer's own host model::Params, trained in
// place with the CPU kernels (model/model.h's family over a DistributedExchange on the plan's data
// plane). Nothing is loaded or brought back: the host Params are the units. A dense snapshot is
// copied at once, on the training thread; a sparse slot is read in place by the snapshot thread
// (the Trainer waits for that copy before the next update: SparseSnapshots::wait()). An abort stops
// a pass at the exchange's next stop point (before a layer's pass or an expert's block), where the
// data plane's abort alone would wait for the worker's next collective.
#pragma once

#include <atomic>

#include "model/optimizer.h"
#include "runtime/compute.h"
#include "runtime/distributed_exchange.h"

namespace sal::runtime {

class OnHost final : public Compute {
 public:
  OnHost(model::Params& params, const model::OptimConfig& optim) : params_(params), optim_(optim) {}

  Status release() override;
  Status to_host() override { return {}; }
  Status to_host(const std::vector<model::UnitId>&) override { return {}; }
  bool holds(const HeldExperts&) const override { return false; }
  Status load(const HeldExperts&) override { return {}; }
  Status set_plan(const DevicePlan& plan) override;
  std::string device_key() const override { return ""; }
  bool device_plane_ready() const override { return false; }

  Status zero_grads() override;
  Result<model::StepStats> step(const model::Batch& b, int64_t global_tokens) override;
  Result<model::StepStats> evaluate(const model::Batch& b, int64_t global_tokens) override;
  Result<model::StepStats> evaluate_in_group(const model::Batch& b, int64_t global_tokens) override;
  Status sync_gradients(const std::vector<SharedExpert>& shared) override;
  Result<double> grad_norm() override;
  Status sync_gradients_over(comm::Collectives& comm, const std::vector<SharedExpert>& shared) override;
  Result<double> grad_norm_over(comm::Collectives& comm, const std::vector<Counts>& replicas) override;
  Status backup_grads() override;
  Status restore_grads() override;
  Status update(double lr, double grad_scale, int64_t t) override;
  Status balance_router(const model::RouterLoad& load) override { return model::update_router_bias(params_, load); }

  Result<ckpt::SnapshotUnits> snapshot(const std::vector<const model::Unit*>& units) override;
  void put_slot(SparseSnapshots& sparse, uint64_t step, double grad_norm, const ModelShape& shape,
                std::vector<const model::Unit*> written) override;

  void log_dispatch(bool on) override { logging_ = on; }
  std::optional<model::IterationLog> take_log() override {
    if (!logging_) return std::nullopt;
    return std::move(log_);
  }

  void abort(const std::string&) override { aborted_ = true; }
  void clear_abort() override { aborted_ = false; }

 private:
  Status plan_set() const;
  DistributedExchange exchange(comm::Collectives& comm, const std::vector<Counts>& replicas);

  model::Params& params_;
  model::OptimConfig optim_;
  DevicePlan plan_;  // comm and hooks of the plan in force (comm null: none)
  bool logging_ = false;
  model::IterationLog log_;  // the step's dispatch, pass by pass (passes_ so far)
  uint32_t passes_ = 0;
  std::vector<std::vector<float>> grad_backup_;  // backup_grads(): every unit's gradient, in units() order
  std::atomic<bool> aborted_{false};             // from abort() (another thread) to clear_abort()
};

}  // namespace sal::runtime
