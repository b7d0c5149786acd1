// log.h — logging setup for every salamander process. Logging itself is spdlog (include
// <spdlog/spdlog.h> in .cpp files only: it is slow to compile). Plain lines or one JSON object per
// line; to stderr and/or a file; the process name ("controller", "agent 3", "worker 3.0") in each line.
// A command that may say one thing thousands of times (the simulator) can have stderr say each
// distinct message once and count the rest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  bool stderr_once = false;       // each distinct message once on stderr; repeats only counted
};

// Validates the level/format names and installs the default logger. Safe to call again.
Status init(const Options& opts);

Result<Format> parse_format(const std::string& s);
bool valid_level(const std::string& s);

// With Options::stderr_once: each message said more than once on stderr (its text) and how many
// times in all, in the order first said.
std::vector<std::pair<std::string, uint64_t>> repeated_on_stderr();

// Flushes and drops all sinks (call before exit / exec).
void shutdown();

}  // namespace sal::log

namespace sal {

// Bad input from peers, logged once per kind: the first occurrence of a kind is logged at once;
// further ones of that kind are only counted until `quiet_ms` has passed, and the next one after
// that is logged with the count of those in between. A flood of 10 000 malformed frames a second
// on an endpoint therefore writes one line per kind per quiet period, not one per frame. Kinds are
// short fixed names chosen by the code ("malformed", "unknown message type"), never peer text;
// past kMaxKinds distinct kinds everything counts as "other". Not thread-safe: one per thread.
class KindLog {
 public:
  static constexpr size_t kMaxKinds = 32;
  explicit KindLog(int64_t quiet_ms = 10000) : quiet_ns_(quiet_ms * 1'000'000) {}

  // True if this occurrence may be logged; `suppressed` then holds how many of its kind were
  // counted (not logged) since the last one logged.
  bool allow(std::string_view kind, int64_t now_ns, uint64_t& suppressed);

  // " (and 37 more like it since the last line)" for a count, "" for none.
  static std::string more(uint64_t suppressed);

 private:
  struct Kind {
    std::string name;
    int64_t logged_ns = 0;
    uint64_t counted = 0;
  };
  int64_t quiet_ns_;
  std::vector<Kind> kinds_;
};

}  // namespace sal
