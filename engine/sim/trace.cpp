// trace.cpp — see trace.h.
#include "sim/trace.h"

#include <stdexcept>

#include "core/paths.h"
#include "core/strings.h"

namespace sal::sim {

Result<std::vector<TraceEvent>> read_bamboo_trace(const std::string& path) {
  auto text = read_file(path, 64u << 20);
  if (!text) return Error("trace " + text.error().message());
  return parse_bamboo_trace(*text, path);
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
