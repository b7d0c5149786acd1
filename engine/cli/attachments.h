// attachments.h — what `salamander run` and `salamander controller` attach to their controller
// (mesh/attachment.h): the console (console/console.h) with the simulator's REPL module (sim.*,
// whose background jobs live in `sim_jobs`, which must outlive the controller), and, with
// metrics.bind set, the Prometheus endpoint (metrics/attachment.h).
#pragma once

#include <string>
#include <vector>

#include "job/config.h"
#include "mesh/attachment.h"
#include "sim/jobs.h"

namespace sal::cli {

std::vector<mesh::Attach> controller_attachments(const job::JobConfig& job, const std::string& run_dir,
                                                 sim::SimJobs& sim_jobs);

}  // namespace sal::cli
