// planner_config.cpp — see planner_config.h.
#include "job/planner_config.h"

namespace sal::job {

policy::PlannerConfig planner_config(const JobConfig& job) {
  policy::PlannerConfig c;
  c.shape = model_shape(job.model);
  c.slots = uint32_t(job.policies.slots);
  c.min_replicas = uint32_t(job.policies.min_replicas);
  c.groups = uint32_t(job.parallel.groups);
  c.redundancy = uint32_t(job.parallel.redundancy);
  c.failures = policy::FailureSettings{job.policies.node_mtbf_h, job.policies.correlated_failures};
  c.peer_copies = uint32_t(sparse_peer_copies(job));
  c.snapshot_cpu_share = job.train.snapshot_cpu_share;
  c.checkpoint_every = job.train.checkpoint_every;
  c.expert_logs = job.train.expert_logs;
  c.rebalance_every = job.train.rebalance_every;
  c.recovery = job.train.recovery;
  c.dispatch_by_counts = job.train.dispatch == "counts";
  c.allocation = job.policies.allocation;
  c.placement = job.policies.placement;
  c.checkpoint = job.policies.checkpoint;
  c.redundancy_policy = job.policies.redundancy;
  c.health_policy = job.policies.health;
  c.dir = job.dir;
  c.budget_ms = job.policies.budget_ms;
  c.memory_limit = size_t(job.policies.memory_mb) << 20;
  return c;
}

}  // namespace sal::job
