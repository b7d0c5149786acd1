// job_training.cpp — see job_training.h.
#include "cli/job_training.h"

#include <algorithm>

#include "wire/curve.h"

namespace sal::cli {

runtime::TrainSpec train_spec_of(const job::JobConfig& job) {
  runtime::TrainSpec s;
  s.dims = job::model_dims(job.model);
  s.data_path = job::resolve_path(job, job.data.path);
  s.data_format = job.data.format;
  if (!job.model.routing_trace.empty()) s.routing_trace = job::resolve_path(job, job.model.routing_trace);
  s.routing_every = job.model.routing_every;
  s.dispatch = job.train.dispatch == "counts" ? runtime::Split::counts : runtime::Split::even;
  s.shadow_experts = job.train.shadow_experts;
  s.optim.lr = job.train.lr;
  s.optim.warmup = job.train.warmup;
  s.optim.total_steps = job.train.steps;
  s.optim.weight_decay = job.train.weight_decay;
  s.optim.clip = job.train.clip;
  s.global_batch = int(job.train.batch);
  s.micro_batch = int(job.train.micro_batch);
  s.seed = uint64_t(job.train.seed);
  s.threads = int(job.train.threads);
  s.snapshots = job.train.checkpoint_every > 0;
  s.expert_logs = job.train.expert_logs;
  s.log_copies = uint32_t(job.train.log_copies);
  s.digest_every = job.train.digest_every;
  s.fault_injection = job.faults.inject;
  s.validation = job.data.validation;
  s.eval_every = job.train.eval_every;
  s.eval_sequences = int(job.train.eval_sequences > 0 ? job.train.eval_sequences : job.train.batch);
  if (job.train.warm_up) {  // the largest share a worker computes: one of the fewest workers holding every expert
    const int64_t slots = std::max<int64_t>(1, job.policies.slots);
    const int64_t nodes = std::max<int64_t>(1, job.mesh.nodes);
    const int64_t fewest = std::clamp<int64_t>((job.model.experts + slots - 1) / slots, 1, nodes);
    s.warm_up_sequences = int((job.train.batch + fewest - 1) / fewest);
    s.warm_up_experts = int(slots);
  }
  return s;
}

Result<runtime::TrainSpec> load_train_spec(const wire::JobSpec& spec, const std::string& data_host) {
  auto job = job::load_text(spec.text, spec.label, spec.dir);
  if (!job) return job.error().with_context("the job the controller sent");
  if (!job->security.private_network && !wire::is_local_endpoint("tcp://" + data_host + ":0"))
    return fail("--data-host ", data_host, " is reachable from other hosts, and the data plane (Gloo's TCP pairs) ",
                "is not authenticated: refusing to listen there unless the job states a private network ",
                "(security = { private_network = true })");
  auto s = train_spec_of(*job);
  s.data_host = data_host;
  s.slice_mac_key = spec.slice_mac_key;
  return s;
}

}  // namespace sal::cli
