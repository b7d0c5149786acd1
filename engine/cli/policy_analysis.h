// policy_analysis.h — the analysis subcommands of `salamander policy`: recovery probability of a
// plan (and the comparison of placements, Lazarus Fig. 8), SPARe layouts and closed forms, and
// MoEtion's checkpoint window. (check and plan are in cmd_policy.cpp.)
#pragma once

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/policy_tools.h"

namespace sal::cli {

int policy_recovery(const Args& args);
int policy_spare(const Args& args);
int policy_window(const Args& args);

// Shared with cmd_policy.cpp.
const std::vector<OptSpec>& policy_plan_options();
Result<PlanRequest> policy_plan_request(const Parsed& p, bool need_placement);

}  // namespace sal::cli
