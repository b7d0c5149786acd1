// policy_tools.h — shared by the `salamander policy` subcommands: deciding offline with a named
// policy (no slot, no fallback: a failing policy is an error the author must see), and turning
// plans into the algorithm library's placements.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "plan/plan.h"
#include "policy/algo/recovery.h"
#include "policy/decision.h"
#include "policy/policy_set.h"

namespace sal::cli {

// Loads `what` (name, path or source) as a generation of `kind`, decides on `in`, validates.
Result<policy::Proposal> decide_offline(policy::PolicySet& set, policy::Kind kind, const std::string& what,
                                        const policy::Input& in);

struct PlanRequest {
  std::vector<std::vector<double>> loads;
  uint32_t nodes = 0, slots = 0, min_replicas = 1;
  std::string allocation = "lazarus", placement = "mro";
};

// Allocation then placement, as the controller would, for the given loads.
Result<plan::Plan> plan_offline(policy::PolicySet& set, const PlanRequest& req, std::string* note = nullptr);

std::vector<algo::LayerPlacement> placements_of(const plan::Plan& p);

}  // namespace sal::cli
