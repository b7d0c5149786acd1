// plan_times.h — where a worker's plan switch went (Trainer::apply_plan): leaving the plan in force,
// connecting the new plan's data planes, moving state, each with the parts that tell a slow switch's
// cause apart, and the line a worker's log says of it. Pure values and text.
#pragma once

#include <string>

namespace sal::runtime {

// Milliseconds. leave: the snapshot thread letting go of the units, the compute's download.
// connect: the host planes (the plan's and the group's, connected or kept), the ranks' device keys
// gathered over the plan's plane — the plan's first collective, so it waits for the last rank to
// arrive and a slow leave elsewhere shows here — and the compute taking the plan (a GPU's device
// plane connected or kept); connect_ms is their sum. migrate: the units moved between ranks or
// restored, then the compute's load of them (a GPU's upload); migrate_ms is the whole.
struct PlanTimes {
  double leave_ms = 0, connect_ms = 0, migrate_ms = 0;
  double planes_ms = 0, devices_ms = 0, compute_plan_ms = 0, load_ms = 0;
};

// "leaving the plan in force 1.0 ms, data plane 9.0 ms (host planes 2.0, the ranks' devices 6.0,
// the compute's plan 1.0), moving state 5.0 ms (of which the compute's load 3.0)".
std::string switch_phases(const PlanTimes& t);

}  // namespace sal::runtime
