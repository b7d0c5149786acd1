// job_training.h — a job file's training settings as the worker runtime takes them: the model's
// shape, the corpus path (resolved against the job file's directory), the optimizer, the batch, the
// seed and the thread count. Workers evaluate the job text the controller sends them with this.
#pragma once

#include <string>

#include "core/result.h"
#include "job/config.h"
#include "runtime/train_spec.h"
#include "wire/messages.h"

namespace sal::cli {

runtime::TrainSpec train_spec_of(const job::JobConfig& job);

// Evaluates the job text a worker was sent (exactly as the controller did) into a TrainSpec. A
// data host beyond loopback is refused unless the job states a private network
// (security.private_network): the data plane's Gloo pairs are not authenticated.
Result<runtime::TrainSpec> load_train_spec(const wire::JobSpec& spec, const std::string& data_host);

}  // namespace sal::cli
