// sim_fit.h — `salamander sim fit RUN_DIR [-o SCENARIO.lua] [--job JOB.lua] [--json]`: turns a
// finished `salamander run` into a simulator scenario that replays it — the same cluster, every
// node loss and join at its time (seconds since training began), the step-time model fitted by
// least squares to the run's per-step times at each live-worker count, recovery costs from the
// recoveries it measured, and a horizon equal to its training wall time — so that
// `salamander sim SCENARIO.lua` predicts the samples the run trained (the simulator's calibration).
#pragma once

#include "cli/commands.h"

namespace sal::cli {

int cmd_sim_fit(const Args& args);

}  // namespace sal::cli
