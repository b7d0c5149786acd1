// log.h — logging setup for every salamander process. Logging itself is spdlog (include
// <spdlog/spdlog.h> in .cpp files only: it is slow to compile). Plain lines or one JSON object per
// line; to stderr and/or a file; the process name ("controller", "agent 3", "worker 3.0") in each line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace sal::log {

enum class Format { plain, json };

struct Options {
  std::string level = "info";     // trace, debug, info, warn, error, critical, off
  Format format = Format::plain;
  std::string process = "salamander";
  std::string file;               // empty: no file sink
  bool to_stderr = true;
  std::string stderr_level;       // empty: same as level (e.g. "warn" to keep a terminal quiet)
};

// Validates the level/format names and installs the default logger. Safe to call again.
Status init(const Options& opts);

Result<Format> parse_format(const std::string& s);
bool valid_level(const std::string& s);

// Flushes and drops all sinks (call before exit / exec).
void shutdown();

}  // namespace sal::log

namespace sal {

// Lets through at most `per_second` events per second and counts the rest, so a flood of bad
// input produces a few log lines and a count instead of a flood of lines.
class RateLimiter {
 public:
  explicit RateLimiter(int per_second = 10) : per_second_(per_second) {}
  // True if this event may be logged; `suppressed` then holds how many were dropped before it.
  bool allow(int64_t now_ns, uint64_t& suppressed) {
    if (now_ns - window_start_ns_ >= 1'000'000'000) {
      window_start_ns_ = now_ns;
      in_window_ = 0;
    }
    if (in_window_ >= per_second_) {
      ++dropped_;
      return false;
    }
    ++in_window_;
    suppressed = dropped_;
    dropped_ = 0;
    return true;
  }

 private:
  int per_second_;
  int in_window_ = 0;
  int64_t window_start_ns_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace sal
