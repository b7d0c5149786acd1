// trace.cpp — see trace.h.
#include "sim/trace.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <set>
#include <stdexcept>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::sim {

Result<std::vector<TraceEvent>> read_bamboo_trace(const std::string& path) {
  return read_trace(path, TraceFormat{"bamboo"});
}

Result<double> trace_time_unit(const std::string& unit) {
  if (unit == "s") return 1.0;
  if (unit == "ms") return 0.001;
  if (unit == "min") return 60.0;
  if (unit == "h") return 3600.0;
  return fail("time unit '", unit, "': expected s, ms, min or h");
}

Result<std::vector<TraceEvent>> read_trace(const std::string& path, const TraceFormat& format) {
  auto text = read_file(path, 64u << 20);
  if (!text) return Error("trace " + text.error().message());
  return parse_trace(*text, path, format);
}

Result<std::vector<TraceEvent>> parse_trace(const std::string& text, const std::string& path, const TraceFormat& format) {
  std::string name = format.name;
  if (name == "auto") {
    auto detected = detect_trace_format(text, path);
    if (!detected) return detected.error();
    name = *detected;
  }
  if (name == "bamboo") return parse_bamboo_trace(text, path);
  if (name == "counts") return parse_count_trace(text, path);
  if (name == "series") return parse_series_trace(text, path, format.unit_s);
  return fail("trace format '", name, "': expected auto, bamboo, counts or series");
}

namespace {

// "2021-12-11, 11:11:30, 55" -> seconds since the epoch (UTC) and the count.
std::optional<std::pair<int64_t, int64_t>> count_line(const std::string& l) {
  int y, mo, d, h, mi, s;
  long long n;
  char tail;
  if (std::sscanf(l.c_str(), "%d-%d-%d , %d:%d:%d , %lld %c", &y, &mo, &d, &h, &mi, &s, &n, &tail) != 7) return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60 || n < 0 || n > 1'000'000)
    return std::nullopt;
  struct tm t {};
  t.tm_year = y - 1900, t.tm_mon = mo - 1, t.tm_mday = d, t.tm_hour = h, t.tm_min = mi, t.tm_sec = s;
  return std::pair<int64_t, int64_t>{int64_t(timegm(&t)), n};
}

// A sample this much older than the line before it is a later observation of overlapping sampling
// windows, taken in the file's order at the previous line's time (Bamboo's GCP V100 trace: bursts
// of three one-minute samples, a burst starting up to 60 s before the last one ended); further
// back, the file is not one trace (two concatenated, or unsorted) and is refused.
constexpr int64_t kOverlapMs = 300'000;

// Live-node counts over time as node events: nodes named node1, node2, ... added, or removed
// newest first, to reach each count.
class CountEvents {
 public:
  explicit CountEvents(const std::string& path) : path_(path) {}

  Status add(int64_t ms, int64_t live, int line) {
    if (!any_) first_ = last_ = ms, any_ = true;
    if (ms < last_ - kOverlapMs)
      return fail(path_, ":", line, ": time goes back (", (ms - last_) / 1000, " s after the previous line; samples up to ",
                  kOverlapMs / 1000, " s older are taken in the file's order)");
    last_ = std::max(last_, ms);
    while (int64_t(live_.size()) < live) {
      live_.push_back("node" + std::to_string(++named_));
      out_.push_back({last_ - first_, true, live_.back(), line});
    }
    while (int64_t(live_.size()) > live) {
      out_.push_back({last_ - first_, false, live_.back(), line});
      live_.pop_back();
    }
    return {};
  }

  Result<std::vector<TraceEvent>> take() {
    if (!any_) return fail(path_, ": no lines");
    if (out_.empty()) return fail(path_, ": no node is ever live");
    return std::move(out_);
  }

 private:
  const std::string& path_;
  std::vector<TraceEvent> out_;
  std::vector<std::string> live_;  // node names, newest last
  int64_t first_ = 0, last_ = 0, named_ = 0;
  bool any_ = false;
};

// "2021-07-26T18:42:00Z", "2021-07-26 18:42:00.5+02:00", "2021-07-26T18:42" -> ms since the epoch
// (UTC; no zone is UTC).
std::optional<int64_t> iso_time_ms(const std::string& text) {
  int y, mo, d, h, mi, used = 0;
  char sep;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &used) != 6) return std::nullopt;
  if ((sep != 'T' && sep != ' ') || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59)
    return std::nullopt;
  std::string rest = text.substr(size_t(used));
  double sec = 0;
  if (!rest.empty() && rest[0] == ':') {
    size_t n = 1;
    while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '.')) ++n;
    try {
      sec = std::stod(rest.substr(1, n - 1));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (sec < 0 || sec >= 61) return std::nullopt;
    rest = rest.substr(n);
  }
  int64_t offset_min = 0;
  if (rest == "Z" || rest.empty()) {
  } else if ((rest[0] == '+' || rest[0] == '-') && (rest.size() == 6 || rest.size() == 5 || rest.size() == 3)) {
    int oh = 0, om = 0;
    if (std::sscanf(rest.c_str() + 1, rest.size() == 5 ? "%2d%2d" : "%2d:%2d", &oh, &om) < 1 || oh > 23 || om > 59)
      return std::nullopt;
    offset_min = (rest[0] == '+' ? 1 : -1) * (oh * 60 + om);
  } else {
    return std::nullopt;
  }
  struct tm t {};
  t.tm_year = y - 1900, t.tm_mon = mo - 1, t.tm_mday = d, t.tm_hour = h, t.tm_min = mi;
  return int64_t(timegm(&t)) * 1000 + std::llround(sec * 1000) - offset_min * 60'000;
}

// A plain number (no trailing text), or nothing.
std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

struct SeriesLine {
  int64_t ms = 0;
  int64_t live = 0;
};

// "<time>,<live nodes>": the time ISO 8601 or a number of units; a count a whole number >= 0.
Result<SeriesLine> series_line(const std::string& l, double unit_s) {
  auto f = split(l, ',');
  if (f.size() != 2) return fail("expected <time>,<live nodes>, got '", clip(l, 60), "'");
  const std::string time(trim(f[0])), count(trim(f[1]));
  SeriesLine out;
  if (auto iso = iso_time_ms(time)) {
    out.ms = *iso;
  } else if (auto t = number(time); t && *t >= 0 && *t * unit_s < 1e12) {
    out.ms = std::llround(*t * unit_s * 1000);
  } else if (t && *t >= 0) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3g", *t * unit_s);
    return fail("'", clip(time, 40), "' is ", seconds, " s, later than any clock (milliseconds since 1970? say "
                "time_unit = 'ms')");
  } else {
    return fail("'", clip(time, 40), "' is neither an ISO 8601 time nor a number of time units >= 0");
  }
  auto n = number(count);
  if (!n || *n < 0 || *n > 1e6 || *n != std::floor(*n)) return fail("'", clip(count, 40), "' is not a count of live nodes");
  out.live = int64_t(*n);
  return out;
}

// A line of two fields (a series) or three (Bamboo's events) none of which is a number or a time: the
// column names ("time,count", "time,event,node").
bool header_line(const std::string& l) {
  auto f = split(l, ',');
  if (f.size() != 2 && f.size() != 3) return false;
  for (const auto& x : f) {
    const std::string v(trim(x));
    if (v.empty() || number(v) || iso_time_ms(v)) return false;
  }
  return true;
}

// A line as a spreadsheet or a script may have written it, in the readers' terms: fields in double
// quotes unquoted, ';' or tabs as the separator where the line has no comma, and the empty fields a
// trailing separator leaves dropped.
std::string plain_fields(std::string l) {
  l.erase(std::remove(l.begin(), l.end(), '"'), l.end());
  if (l.find(',') == std::string::npos)
    for (char sep : {';', '\t'})
      if (l.find(sep) != std::string::npos) {
        std::replace(l.begin(), l.end(), sep, ',');
        break;
      }
  while (!l.empty() && (l.back() == ',' || std::isspace(static_cast<unsigned char>(l.back())))) l.pop_back();
  return l;
}

// A Bamboo event's kind as written ("add", " Remove"), trimmed and in lower case.
std::string event_kind(std::string_view field) { return to_lower(trim(field)); }

// A line that carries data: its 1-based number, its fields as plain_fields reads them, and the
// line as written (for errors).
struct DataLine {
  int line = 0;
  std::string text, written;
};

// The lines that carry data, without a byte order mark, blank or '#' lines, and without a first
// line of column names (put in *header where given).
std::vector<DataLine> data_lines(const std::string& text, std::string* header = nullptr) {
  std::vector<DataLine> out;
  for (auto& [n, l] : content_lines(without_bom(text)))
    if (std::string fields = plain_fields(l); !fields.empty()) out.push_back({n, std::move(fields), std::move(l)});
  // pandas writes its row index as an unnamed first column (",timestamp,count", then "0,<time>,8"):
  // dropped
  if (!out.empty() && out.front().text.front() == ',')
    for (auto& d : out) d.text.erase(0, std::min(d.text.size(), d.text.find(',') + 1));
  if (!out.empty() && header_line(out.front().text)) {
    if (header) *header = out.front().written;
    out.erase(out.begin());
  }
  return out;
}

}  // namespace

Result<std::string> detect_trace_format(const std::string& text, const std::string& path) {
  std::string header;
  auto lines = data_lines(text, &header);
  if (lines.empty() && !header.empty()) return fail(path, ": no lines after the column names '", clip(header, 60), "'");
  if (lines.empty()) return fail(path, ": no lines");
  const auto& [line, l, written] = lines.front();
  auto f = split(l, ',');
  if (f.size() == 3 && (event_kind(f[1]) == "add" || event_kind(f[1]) == "remove")) return std::string("bamboo");
  if (count_line(l)) return std::string("counts");
  if (f.size() == 2) return std::string("series");
  return fail(path, ":", line, ": cannot tell the trace's format from '", clip(written, 60),
              "' (bamboo: <ms>,add|remove,<node>; counts: YYYY-MM-DD, HH:MM:SS, <live nodes>; series: "
              "<time>,<live nodes>)");
}

Result<std::vector<TraceEvent>> parse_series_trace(const std::string& text, const std::string& path, double unit_s) {
  CountEvents events(path);
  for (const auto& [line, l, written] : data_lines(text)) {
    auto p = series_line(l, unit_s);
    if (!p) return fail(path, ":", line, ": ", p.error().message());
    SAL_TRY(events.add(p->ms, p->live, line));
  }
  return events.take();
}

Result<std::vector<TraceEvent>> parse_count_trace(const std::string& text, const std::string& path) {
  CountEvents events(path);
  for (const auto& [line, l, written] : data_lines(text)) {
    auto p = count_line(l);
    if (!p) return fail(path, ":", line, ": expected YYYY-MM-DD, HH:MM:SS, <live nodes>, got '", clip(written, 60), "'");
    SAL_TRY(events.add(p->first * 1000, p->second, line));
  }
  return events.take();
}

// A node's add while it is live, or its remove while it is not, says the file is not one trace's
// events (a name mistyped, two traces merged): refused rather than replayed as something else.
Status check_node_event(std::set<std::string>& live, const TraceEvent& e, const std::string& path) {
  if (e.add && !live.insert(e.node).second)
    return fail(path, ":", e.line, ": node '", clip(e.node, 40),
                "' is added while it is live (added before, not removed)");
  if (!e.add && live.erase(e.node) == 0)
    return fail(path, ":", e.line, ": node '", clip(e.node, 40), "' is removed while it is not live (never added, or ",
                "removed already)");
  return {};
}

Result<std::vector<TraceEvent>> parse_bamboo_trace(const std::string& text, const std::string& path) {
  std::vector<TraceEvent> out;
  std::set<std::string> live;
  for (const auto& [line, l, written] : data_lines(text)) {
    auto f = split(l, ',');
    if (f.size() != 3) return fail(path, ":", line, ": expected <ms>,add|remove,<node>, got '", clip(written, 60), "'");
    TraceEvent e;
    e.line = line;
    auto ms = number(std::string(trim(f[0])));
    if (!ms || *ms < 0 || *ms >= 1e15) return fail(path, ":", line, ": '", f[0], "' is not a time in milliseconds");
    e.ms = std::llround(*ms);
    auto kind = event_kind(f[1]);
    if (kind != "add" && kind != "remove")
      return fail(path, ":", line, ": event '", trim(f[1]), "' is neither add nor remove");
    e.add = kind == "add";
    e.node = std::string(trim(f[2]));
    if (!out.empty() && e.ms < out.back().ms)
      return fail(path, ":", line, ": time ", e.ms, " ms goes back (the previous event is at ", out.back().ms, " ms)");
    SAL_TRY(check_node_event(live, e, path));
    out.push_back(std::move(e));
  }
  if (out.empty()) return fail(path, ": no events");
  return out;
}

}  // namespace sal::sim
