// on_host.cpp — see on_host.h.
#include "runtime/on_host.h"

#include <memory>

namespace sal::runtime {

Status OnHost::release() {
  plan_ = {};
  return {};
}

Status OnHost::set_plan(const DevicePlan& plan) {
  plan_ = plan;
  return {};
}

Status OnHost::plan_set() const {
  if (!plan_.comm) return fail("no plan's data plane to train over");
  return {};
}

Status OnHost::zero_grads() {
  params_.zero_grads();
  log_.clear();
  passes_ = 0;
  return {};
}

// The plan's exchange over `comm`, stopped by an abort.
DistributedExchange OnHost::exchange(comm::Collectives& comm, const std::vector<Counts>& replicas) {
  DistributedExchange ex(comm, params_, replicas);
  ex.split = plan_.split;
  ex.shadows = plan_.shadows;
  ex.stopping = [this] { return aborted_.load(); };
  return ex;
}

// In a grouped plan the tokens cross the group's plane, with the group's replicas.
Result<model::StepStats> OnHost::step(const model::Batch& b, int64_t global_tokens) {
  SAL_TRY(plan_set());
  DistributedExchange ex = exchange(plan_.group ? *plan_.group : *plan_.comm,
                                    plan_.group ? plan_.group_replicas : plan_.replicas);
  ex.weights = b.rank_shares;
  ex.before_alltoall = plan_.before_alltoall;
  ex.before_backward = plan_.before_backward;
  ex.log = logging_ ? &log_ : nullptr;
  ex.log_pass = passes_++;
  auto m = model::make_model(params_);
  m->set_aux_share(b.aux_share);
  auto stats = m->step(b, global_tokens, ex);
  if (stats) stats->expert_rows = ex.expert_rows(), stats->expert_cpu_ms = ex.expert_cpu_ms();
  return stats;
}

Result<model::StepStats> OnHost::evaluate(const model::Batch& b, int64_t global_tokens) {
  SAL_TRY(plan_set());
  DistributedExchange ex = exchange(*plan_.comm, plan_.replicas);
  return model::make_model(params_)->evaluate(b, global_tokens, ex);
}

Result<model::StepStats> OnHost::evaluate_in_group(const model::Batch& b, int64_t global_tokens) {
  if (!plan_.group) return fail("no group's data plane to evaluate over (the plan has no groups)");
  DistributedExchange ex = exchange(*plan_.group, plan_.group_replicas);
  return model::make_model(params_)->evaluate(b, global_tokens, ex);
}

// Every non-expert unit over every rank, then each expert held by two or more ranks among its
// holders only.
Status OnHost::sync_gradients(const std::vector<SharedExpert>& shared) {
  SAL_TRY(plan_set());
  return sync_gradients_over(*plan_.comm, shared);
}

Result<double> OnHost::grad_norm() {
  SAL_TRY(plan_set());
  return grad_norm_over(*plan_.comm, plan_.replicas);
}

Status OnHost::sync_gradients_over(comm::Collectives& comm, const std::vector<SharedExpert>& shared) {
  if (comm.size() <= 1) return {};
  SAL_TRY(sum_dense_gradients(comm, params_));
  return reduce_among_holders(comm, comm.rank(), shared, params_);
}

Result<double> OnHost::grad_norm_over(comm::Collectives& comm, const std::vector<Counts>& replicas) {
  return global_grad_norm(comm, params_, replicas);
}

// The buffers are kept from step to step.
Status OnHost::backup_grads() {
  auto units = params_.units();
  grad_backup_.resize(units.size());
  for (size_t i = 0; i < units.size(); ++i) grad_backup_[i].assign(units[i]->g.begin(), units[i]->g.end());
  return {};
}

Status OnHost::restore_grads() {
  auto units = params_.units();
  if (grad_backup_.size() != units.size()) return fail("no gradients of these units were set aside");
  for (size_t i = 0; i < units.size(); ++i) {
    if (grad_backup_[i].size() != units[i]->g.size())
      return fail("the gradients set aside are not ", units[i]->id.name(), "'s");
    units[i]->g = grad_backup_[i];
  }
  return {};
}

Status OnHost::update(double lr, double grad_scale, int64_t t) {
  model::apply_adamw(params_, optim_, lr, grad_scale, t);
  return {};
}

Result<ckpt::SnapshotUnits> OnHost::snapshot(const std::vector<const model::Unit*>& units) {
  std::vector<model::Unit> copies;
  for (const model::Unit* u : units) {
    model::Unit c;
    c.id = u->id;
    c.w = u->w;
    c.m = u->m;
    c.v = u->v;
    copies.push_back(std::move(c));
  }
  auto out = std::make_shared<model::UnitViews>(model::views_of(std::move(copies)));
  return ckpt::SnapshotUnits([out]() -> Result<model::UnitViews> { return std::move(*out); });
}

void OnHost::put_slot(SparseSnapshots& sparse, uint64_t step, double grad_norm, const ModelShape& shape,
                      std::vector<const model::Unit*> written) {
  sparse.after_commit(step, grad_norm, shape, std::move(written));
}

}  // namespace sal::runtime
