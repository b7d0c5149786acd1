// trace.h — spot-instance traces, read as node events. Drills replay them on a local mesh
// (drill/trace.h); the simulator replays them node for node (cluster.h). Three formats:
//  - "bamboo" (Bamboo, NSDI'23; reused by Oobleck): one event per line, "<ms>,add|remove,<node>",
//    times ascending;
//  - "counts" (Bamboo's Google Cloud traces): "YYYY-MM-DD, HH:MM:SS, N" a line, N nodes live;
//  - "series" (a cloud's metrics export: CloudWatch's in-service instances, a spot fleet's size
//    sampled by a script): "<time>,<N>" a line, the time an ISO 8601 date and time
//    ("2021-07-26T18:42:00Z", an offset or none taken as UTC) or a number in a stated unit
//    (seconds by default: the time since the trace began).
// A trace of counts reads as the same events as a Bamboo trace: nodes added, or removed newest
// first, to reach N. "auto" tells the three apart by the first line that is not a header. Every
// format skips blank lines, lines starting with '#' and a first line of column names
// ("timestamp,count"), and takes a line as a spreadsheet or script may write it: a UTF-8 byte order
// mark, fields in double quotes, ';' or tab as the separator, a trailing separator, pandas' unnamed
// index column (a header starting with a separator). Errors give the file's line numbers.
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

struct TraceFormat {
  std::string name = "auto";  // auto | bamboo | counts | series
  double unit_s = 1.0;        // series: seconds a unit of a numeric time stands for
};

// "s", "ms", "min" or "h" as seconds; anything else is an error naming the four.
Result<double> trace_time_unit(const std::string& unit);

// Errors name the file and line.
Result<std::vector<TraceEvent>> read_bamboo_trace(const std::string& path);
// The same from the file's text; `path` names it in errors.
Result<std::vector<TraceEvent>> parse_bamboo_trace(const std::string& text, const std::string& path);
Result<std::vector<TraceEvent>> parse_count_trace(const std::string& text, const std::string& path);
Result<std::vector<TraceEvent>> parse_series_trace(const std::string& text, const std::string& path, double unit_s);
// "bamboo", "counts" or "series", by the first line that carries content and is not a header.
Result<std::string> detect_trace_format(const std::string& text, const std::string& path);
// A trace in `format` (auto: detected).
Result<std::vector<TraceEvent>> parse_trace(const std::string& text, const std::string& path, const TraceFormat& format);
Result<std::vector<TraceEvent>> read_trace(const std::string& path, const TraceFormat& format);

}  // namespace sal::sim
