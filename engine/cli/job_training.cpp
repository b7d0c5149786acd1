// job_training.cpp — see job_training.h.
#include "cli/job_training.h"

namespace sal::cli {

runtime::TrainSpec train_spec_of(const job::JobConfig& job) {
  runtime::TrainSpec s;
  const auto& m = job.model;
  s.dims.layers = int(m.layers);
  s.dims.d = int(m.d_model);
  s.dims.heads = int(m.heads);
  s.dims.experts = int(m.experts);
  s.dims.top_k = int(m.top_k);
  s.dims.seq_len = int(m.seq_len);
  s.dims.vocab = int(m.vocab);
  s.dims.aux_weight = float(m.aux_loss_weight);
  s.dims.skew = float(m.skew);
  s.dims.hot_experts = int(m.hot_experts);
  s.data_path = job::resolve_path(job, job.data.path);
  s.data_format = job.data.format;
  s.optim.lr = job.train.lr;
  s.optim.warmup = job.train.warmup;
  s.optim.total_steps = job.train.steps;
  s.optim.weight_decay = job.train.weight_decay;
  s.optim.clip = job.train.clip;
  s.global_batch = int(job.train.batch);
  s.seed = uint64_t(job.train.seed);
  s.threads = int(job.train.threads);
  s.snapshots = job.train.checkpoint_every > 0;
  return s;
}

Result<runtime::TrainSpec> load_train_spec(const wire::JobSpec& spec, const std::string& data_host) {
  auto job = job::load_text(spec.text, spec.label, spec.dir);
  if (!job) return job.error().with_context("the job the controller sent");
  auto s = train_spec_of(*job);
  s.data_host = data_host;
  return s;
}

}  // namespace sal::cli
