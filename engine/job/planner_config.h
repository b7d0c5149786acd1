// planner_config.h — what the planner (policy/planner.h) is told of a job: its model shape, slots,
// floor, groups and redundancy, the policy of each kind and where relative policy files are.
#pragma once

#include "job/config.h"
#include "policy/planner.h"

namespace sal::job {

policy::PlannerConfig planner_config(const JobConfig& job);

}  // namespace sal::job
