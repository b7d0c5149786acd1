// plan_times.cpp — see plan_times.h.
#include "runtime/plan_times.h"

#include <spdlog/fmt/fmt.h>

namespace sal::runtime {

std::string switch_phases(const PlanTimes& t) {
  return fmt::format(
      "leaving the plan in force {:.1f} ms, data plane {:.1f} ms (host planes {:.1f}, the ranks' devices {:.1f}, the "
      "compute's plan {:.1f}), moving state {:.1f} ms (of which the compute's load {:.1f})",
      t.leave_ms, t.connect_ms, t.planes_ms, t.devices_ms, t.compute_plan_ms, t.migrate_ms, t.load_ms);
}

}  // namespace sal::runtime
