// repl_module.h — the REPL's `sim` module (sim.run, sim.status, sim.list, sim.result, sim.table,
// sim.cancel): simulations run from a live controller's REPL as background jobs (jobs.h). The
// controller does not link the simulator: whoever starts a controller with a REPL (`salamander
// run`, `salamander controller`) registers this module into its REPL registry
// (console::attach(), which the CLI gives it).
#pragma once

#include <string>

#include "lua/registry.h"
#include "sim/jobs.h"

namespace sal::sim {

// Registers sim.* over `jobs`, which must outlive the registry's REPL server. Scenario paths that
// are not found as typed are looked up in `job_dir` (the job file's directory).
void register_repl_module(lua::ApiRegistry& reg, const std::string& job_dir, SimJobs& jobs);

}  // namespace sal::sim
