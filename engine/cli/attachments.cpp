// attachments.cpp — see attachments.h.
#include "cli/attachments.h"

#include "console/console.h"
#include "metrics/attachment.h"
#include "sim/repl_module.h"

namespace sal::cli {

std::vector<mesh::Attach> controller_attachments(const job::JobConfig& job, const std::string& run_dir,
                                                 sim::SimJobs& sim_jobs) {
  std::vector<mesh::Attach> out;
  out.push_back(console::attach(job.repl, run_dir, [&sim_jobs, dir = job.dir](lua::ApiRegistry& reg) {
    sim::register_repl_module(reg, dir, sim_jobs);
  }));
  if (!job.metrics.bind.empty()) out.push_back(metrics::attach(job));
  return out;
}

}  // namespace sal::cli
