// policy_analysis.h — what the analysis subcommands of `salamander policy` (policy_analysis.cpp:
// recovery probability of a plan and the comparison of placements, Lazarus Fig. 8; the placement
// frontier of `plan --frontier`; SPARe layouts and closed forms; MoEtion's checkpoint window) share
// with cmd_policy.cpp (check, plan). The handlers themselves are declared in commands.h.
#pragma once

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/policy_tools.h"

namespace sal::cli {

// Shared with cmd_policy.cpp: --loads, --nodes, --slots, ... read into a request.
Result<PlanRequest> policy_plan_request(const Parsed& p, bool need_placement);

// `policy plan --frontier`: the frontier of balance against recovery for the request's allocation
// (with mro's own plan weighed too), the lowest balance its replicas allow, and what the request's
// placement policy chooses and why. Returns the exit code.
int print_frontier(const PlanRequest& req, bool json);

}  // namespace sal::cli
