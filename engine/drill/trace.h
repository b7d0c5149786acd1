// trace.h — spot-instance traces replayed by a drill, in any format sim/trace.h reads: Bamboo's
// events ("<ms>,add|remove,<node name>"; reused by Oobleck), Bamboo's Google Cloud counts, or a
// series of live-node counts over time (a cloud's metrics export); told apart by default.
//
// A trace of tens of cloud nodes is scaled to the local mesh: the trace's live-node count L(t) is
// mapped proportionally, target(t) = max(1, round(L(t) * max_nodes / peak)), where peak is the
// most nodes the trace ever has live, and each change of the target becomes an `add` of the
// difference or a `kill` of that many random nodes, at start_s + t * time_scale seconds (with
// fit_s, time_scale = fit_s / the trace's span: the whole trace lasts fit_s). The mesh starts with
// target(0) nodes. Which local node a trace node is does not matter: every node of a
// local mesh is alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "drill/drill_spec.h"
#include "sim/trace.h"

namespace sal::drill {

struct TraceOptions {
  std::string file;
  double time_scale = 1.0 / 600;   // 10 trace minutes per local second
  uint32_t max_nodes = 8;
  double start_s = 0;
  std::string format = "auto";  // or bamboo, counts, series (sim/trace.h)
  double unit_s = 1.0;           // series: seconds a unit of a numeric time stands for
  double fit_s = 0;              // > 0: instead of time_scale, the scale that makes the whole trace last this long
};

using sim::TraceEvent;
using sim::read_bamboo_trace;

struct TracePlan {
  uint32_t initial_nodes = 0;
  std::vector<Action> actions;
  uint32_t peak = 0;        // the trace's most live nodes
  double duration_s = 0;    // scaled
  double time_scale = 0;    // the scale used (TraceOptions' time_scale, or the one fit_s gave)
};
Result<TracePlan> trace_actions(const TraceOptions& o);

}  // namespace sal::drill
