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
#include "policy/plan_recovery.h"
#include "policy/policy_set.h"

namespace sal::cli {

// Loads `what` (name, path or source) as a generation of `kind`, decides on `in`, validates.
Result<policy::Proposal> decide_offline(policy::PolicySet& set, policy::Kind kind, const std::string& what,
                                        const policy::Input& in);

// A small made-up context of `kind` for `policy check` to decide on: 8 nodes x 4 slots, 8 experts
// in 2 layers (one skewed 9:1, one even), f = 2; the placement's replicas {11, 3, ...}; a model
// of 2 layers. operators for checkpoint; 8 data-parallel groups, r left to the policy, for redundancy.
policy::Input synthetic_input(policy::Kind kind);

// What synthetic_input describes, in a few words ("8 nodes x 4 slots, 8 experts, 2 layers").
std::string synthetic_context_text(policy::Kind kind);

struct PlanRequest {
  std::vector<std::vector<double>> loads;
  policy::StepLoads steps;  // recorded steps, [step][layer][expert] (--steps; empty: none)
  std::string steps_read;   // what --steps read ("DIR: 80 files: 5 steps of 16 ranks"), for the text output
  uint32_t nodes = 0, slots = 0, min_replicas = 1;
  std::string allocation = "lazarus", placement = "goodput";
  policy::FailureFacts failures;  // what the placement weighs survival by (rate 0: assumed)
  // What each node holds under the plan in force (--current), [layer][node][slot]: ctx.current.
  std::vector<std::vector<std::vector<uint32_t>>> current;
  policy::MoveFacts moves;  // what re-placing costs (--fetch-s, --horizon-s): ctx.moves
};

// Allocation then placement, as the controller would, for the given loads. `note`: the
// allocation's; `placement`: the placement's proposal (its note and choice).
Result<plan::Plan> plan_offline(policy::PolicySet& set, const PlanRequest& req, std::string* note = nullptr,
                                policy::PlacementProposal* placement = nullptr);

using policy::placements_of;

// A plan file (`policy plan --json`'s): refused naming the file when it cannot be read, is not JSON
// or is not a plan.
Result<plan::Plan> read_plan_file(const std::string& path);

}  // namespace sal::cli
