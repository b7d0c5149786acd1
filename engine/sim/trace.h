// trace.h — spot-instance traces in the Bamboo format (Bamboo, NSDI'23; reused by Oobleck): one
// event per line, "<ms>,add|remove,<node name>", no header, times ascending. Drills replay them on
// a local mesh (drill/trace.h); the simulator replays them node for node (cluster.h). Traces of
// live-node counts ("counts": "YYYY-MM-DD, HH:MM:SS, N" a line, as Bamboo's Google Cloud traces
// are written) read as the same events: nodes added or removed (the newest first) to reach N.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::sim {

struct TraceEvent {
  int64_t ms = 0;
  bool add = true;
  std::string node;
  int line = 0;
};

// Errors name the file and line.
Result<std::vector<TraceEvent>> read_bamboo_trace(const std::string& path);
// The same from the file's text; `path` names it in errors.
Result<std::vector<TraceEvent>> parse_bamboo_trace(const std::string& text, const std::string& path);
Result<std::vector<TraceEvent>> parse_count_trace(const std::string& text, const std::string& path);
// A trace in `format`: "bamboo" or "counts".
Result<std::vector<TraceEvent>> read_trace(const std::string& path, const std::string& format);

}  // namespace sal::sim
