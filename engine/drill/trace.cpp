// trace.cpp — see trace.h.
#include "drill/trace.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::drill {

Result<std::vector<TraceEvent>> read_bamboo_trace(const std::string& path) {
  auto text = read_file(path, 64u << 20);
  if (!text) return Error("trace " + text.error().message());
  std::vector<TraceEvent> out;
  int line = 0;
  for (const auto& raw : split(*text, '\n')) {
    ++line;
    auto l = std::string(trim(raw));
    if (l.empty()) continue;
    auto f = split(l, ',');
    if (f.size() != 3) return fail(path, ":", line, ": expected <ms>,add|remove,<node>, got '", clip(l, 60), "'");
    TraceEvent e;
    e.line = line;
    try {
      size_t used = 0;
      e.ms = std::stoll(std::string(trim(f[0])), &used);
      if (used != trim(f[0]).size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return fail(path, ":", line, ": '", f[0], "' is not a time in milliseconds");
    }
    auto kind = std::string(trim(f[1]));
    if (kind != "add" && kind != "remove") return fail(path, ":", line, ": event '", kind, "' is neither add nor remove");
    e.add = kind == "add";
    e.node = std::string(trim(f[2]));
    if (!out.empty() && e.ms < out.back().ms)
      return fail(path, ":", line, ": time ", e.ms, " ms goes back (the previous event is at ", out.back().ms, " ms)");
    out.push_back(std::move(e));
  }
  if (out.empty()) return fail(path, ": no events");
  return out;
}

Result<TracePlan> trace_actions(const TraceOptions& o) {
  auto events = read_bamboo_trace(o.file);
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
    a.at_s = o.start_s + double(points[i].first->ms) / 1000.0 * o.time_scale;
    a.where = o.file.substr(o.file.rfind('/') + 1) + ":" + std::to_string(points[i].first->line);
    plan.actions.push_back(a);
    current = t;
  }
  plan.duration_s = double(events->back().ms) / 1000.0 * o.time_scale;
  return plan;
}

}  // namespace sal::drill
