// trace.cpp — see trace.h.
#include "sim/trace.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <stdexcept>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::sim {

Result<std::vector<TraceEvent>> read_bamboo_trace(const std::string& path) { return read_trace(path, "bamboo"); }

Result<std::vector<TraceEvent>> read_trace(const std::string& path, const std::string& format) {
  if (format != "bamboo" && format != "counts") return fail("trace format '", format, "': expected bamboo or counts");
  auto text = read_file(path, 64u << 20);
  if (!text) return Error("trace " + text.error().message());
  return format == "bamboo" ? parse_bamboo_trace(*text, path) : parse_count_trace(*text, path);
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
constexpr int64_t kOverlapS = 300;

}  // namespace

Result<std::vector<TraceEvent>> parse_count_trace(const std::string& text, const std::string& path) {
  std::vector<TraceEvent> out;
  std::vector<std::string> live;  // node names, newest last
  int64_t first_s = 0, last_s = 0, named = 0;
  int line = 0;
  bool any = false;
  for (const auto& raw : split(text, '\n')) {
    ++line;
    auto l = std::string(trim(raw));
    if (l.empty()) continue;
    auto p = count_line(l);
    if (!p) return fail(path, ":", line, ": expected YYYY-MM-DD, HH:MM:SS, <live nodes>, got '", clip(l, 60), "'");
    if (!any) first_s = last_s = p->first, any = true;
    if (p->first < last_s - kOverlapS)
      return fail(path, ":", line, ": time goes back (", p->first - last_s, " s after the previous line; samples up to ",
                  kOverlapS, " s older are taken in the file's order)");
    last_s = std::max(last_s, p->first);
    const int64_t ms = (last_s - first_s) * 1000;
    while (int64_t(live.size()) < p->second) {
      live.push_back("node" + std::to_string(++named));
      out.push_back({ms, true, live.back(), line});
    }
    while (int64_t(live.size()) > p->second) {
      out.push_back({ms, false, live.back(), line});
      live.pop_back();
    }
  }
  if (!any) return fail(path, ": no lines");
  if (out.empty()) return fail(path, ": no node is ever live");
  return out;
}

Result<std::vector<TraceEvent>> parse_bamboo_trace(const std::string& text, const std::string& path) {
  std::vector<TraceEvent> out;
  int line = 0;
  for (const auto& raw : split(text, '\n')) {
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

}  // namespace sal::sim
