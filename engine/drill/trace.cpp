// trace.cpp — see trace.h.
#include "drill/trace.h"

#include <algorithm>
#include <cmath>
#include <set>


namespace sal::drill {

Result<TracePlan> trace_actions(const TraceOptions& o) {
  auto events = sim::read_trace(o.file, sim::TraceFormat{o.format, o.unit_s});
  if (!events) return events.error();
  // live count after each group of events with the same time
  std::vector<std::pair<const TraceEvent*, uint32_t>> points;
  std::set<std::string> live;
  for (size_t i = 0; i < events->size(); ++i) {
    const auto& e = (*events)[i];
    if (e.add) live.insert(e.node);
    else live.erase(e.node);
    if (i + 1 == events->size() || (*events)[i + 1].ms != e.ms) points.push_back({&e, uint32_t(live.size())});
  }
  TracePlan plan;
  const double span_s = double(events->back().ms) / 1000.0;
  plan.time_scale = o.fit_s > 0 && span_s > 0 ? o.fit_s / span_s : o.time_scale;
  for (const auto& p : points) plan.peak = std::max(plan.peak, p.second);
  if (plan.peak == 0) return fail(o.file, ": no node is ever live");
  auto target = [&](uint32_t n) {
    return std::max<uint32_t>(1, uint32_t(std::lround(double(n) * o.max_nodes / plan.peak)));
  };
  plan.initial_nodes = target(points.front().second);
  uint32_t current = plan.initial_nodes;
  for (size_t i = 1; i < points.size(); ++i) {
    uint32_t t = target(points[i].second);
    if (t == current) continue;
    Action a;
    a.kind = t > current ? ActionKind::add : ActionKind::kill;
    a.count = t > current ? t - current : current - t;
    a.at_s = o.start_s + double(points[i].first->ms) / 1000.0 * plan.time_scale;
    a.where = o.file.substr(o.file.rfind('/') + 1) + ":" + std::to_string(points[i].first->line);
    plan.actions.push_back(a);
    current = t;
  }
  plan.duration_s = span_s * plan.time_scale;
  return plan;
}

}  // namespace sal::drill
