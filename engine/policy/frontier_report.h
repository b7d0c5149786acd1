// frontier_report.h — the placement frontier (algo/frontier.h) as the people-facing tools show it:
// `salamander policy plan --frontier` (JSON with --json) and the REPL's policy.frontier(). One
// shape for both: the points by balance with their figures, and the balance bound.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "plan/plan.h"
#include "policy/algo/frontier.h"
#include "policy/decision.h"

namespace sal::policy {

// Each layer's demand from a plan's replica counts and the loads ([layer][expert]; a plan with more
// layers than loads reuses them in turn).
std::vector<algo::LayerDemand> frontier_demand(const std::vector<std::vector<uint32_t>>& replicas,
                                               const std::vector<std::vector<double>>& loads);

// {"points": [{name, frontier, beaten_by?, balance, median, balances, load_balance, p}], "bound": [...],
//  "bound_median", "invalid"}; placements left out.
nlohmann::ordered_json frontier_json(const algo::Frontier& f);

// The frontier for a plan's replica counts (its first data-parallel group's) on `loads`, with the
// plan itself weighed as the candidate "in force" (the REPL's policy.frontier()): frontier_json
// plus nodes, slots and floor. With `steps` ([step][layer][expert], the load window's recent ones)
// the balance is judged on each step's own split, by counts or even (algo/step_balance.h).
Result<nlohmann::ordered_json> plan_frontier_json(const plan::Plan& p, const std::vector<std::vector<double>>& loads,
                                                  const StepLoads& steps = {}, bool by_counts = true);

}  // namespace sal::policy
