// trace_plans.h — the placement figures on a recorded expert-load trace (issue 35's acceptance,
// docs/placement.md): for one load file and a shape, the shipped allocation's replicas, the
// frontier of balance against recovery (mro's own plan weighed too), the default placement's
// choice, and the lowest balance the replicas allow; and, for comparison, any allocation +
// placement pair as the controller would decide it. Shared by bench_frontier (the table) and
// test_placement_trace (the claims).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "policy/policy_set.h"

namespace sal::test {

// A plan's figures: balance per layer (its median), P(k) of every layer together.
struct PlanFigures {
  std::string name;
  double median = 0, mean = 0, min = 0, max = 0;  // of the per-layer balance
  std::vector<double> p;                          // P(1), P(2), P(3)
};

struct TraceFigures {
  uint64_t iteration = 0;     // from the file name (table_iter<N>_rank0.log)
  PlanFigures best;           // the most balanced frontier point with P(1) = 1
  PlanFigures chosen;         // the default placement's (goodput) choice
  double chosen_by_counts = 0;  // its median per-layer balance as the dispatcher splits by the counts
  PlanFigures mro;            // mro, the maximum-survival end
  double bound = 0;           // median over the layers of the lowest balance the replicas allow
  int frontier_points = 0;
  double frontier_ms = 0;     // the frontier alone (C++)
};

// Policy options for measuring offline: a budget of 10 s per call, so that a machine busy with
// builds does not turn a 100 ms decision into a timeout (the controller's is policies.budget_ms).
inline policy::PolicyOptions trace_policy_options() {
  policy::PolicyOptions o;
  o.budget_ms = 10'000;
  return o;
}

// The SmartMoE rank0 trace in ../shared/data, as seen from the source tree (may be absent).
std::string smartmoe_rank0_dir();
// The trace files of a directory, by iteration; empty when it is absent.
std::vector<std::string> trace_files(const std::string& dir);

Result<TraceFigures> trace_figures(policy::PolicySet& set, const std::string& file, uint32_t nodes, uint32_t slots,
                                   uint32_t floor);

// The plan `allocation` + `placement` decide for the file's loads, as the controller would.
Result<PlanFigures> pair_figures(policy::PolicySet& set, const std::string& file, uint32_t nodes, uint32_t slots,
                                 uint32_t floor, const std::string& allocation, const std::string& placement);

}  // namespace sal::test
