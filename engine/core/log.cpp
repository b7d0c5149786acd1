// log.cpp — spdlog sinks, a JSON line formatter (one escaped object per record) and a stderr sink
// that writes each distinct message once.
#include "core/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>

#include "core/strings.h"


namespace sal::log {
namespace {

// Formats a record as {"ts":"...","level":"info","proc":"agent 3","msg":"..."}.
class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string process) : process_(std::move(process)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch());
    std::time_t t = secs.count() / 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[64];
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  int(secs.count() % 1000));
    std::string line = "{\"ts\":\"";
    line += ts;
    line += "\",\"level\":\"";
    auto lv = spdlog::level::to_string_view(msg.level);
    line.append(lv.data(), lv.size());
    line += "\",\"proc\":";
    line += json_quote(process_);
    line += ",\"msg\":";
    line += json_quote(std::string_view(msg.payload.data(), msg.payload.size()));
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(process_);
  }

 private:
  std::string process_;
};

std::unique_ptr<spdlog::formatter> make_formatter(const Options& opts) {
  if (opts.format == Format::json) return std::make_unique<JsonFormatter>(opts.process);
  return std::make_unique<spdlog::pattern_formatter>("%H:%M:%S.%e %^%-5l%$ [" + opts.process +
                                                     "] %v");
}

}  // namespace

bool valid_level(const std::string& s) {
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  for (auto* l : kLevels)
    if (s == l) return true;
  return false;
}

Result<Format> parse_format(const std::string& s) {
  if (s == "plain") return Format::plain;
  if (s == "json") return Format::json;
  return fail("unknown log format '", s, "' (expected plain or json)");
}

namespace {

// stderr, each distinct message (level and text) once; the repeats are only counted.
class OnceSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::pair<std::string, uint64_t>> repeated() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const auto& key : order_)
      if (counts_[key] > 1) out.emplace_back(key.substr(key.find(' ') + 1), counts_[key]);
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string key(spdlog::level::to_string_view(msg.level).data(), spdlog::level::to_string_view(msg.level).size());
    key += " " + std::string(msg.payload.data(), msg.payload.size());
    if (++counts_[key] > 1) return;
    order_.push_back(key);
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    std::fwrite(buf.data(), 1, buf.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  std::map<std::string, uint64_t> counts_;
  std::vector<std::string> order_;
};

std::shared_ptr<OnceSink>& once_sink() {
  static std::shared_ptr<OnceSink> sink;
  return sink;
}

spdlog::sink_ptr stderr_sink(const Options& opts) {
  once_sink().reset();
  if (!opts.stderr_once) return std::make_shared<spdlog::sinks::stderr_sink_mt>();
  once_sink() = std::make_shared<OnceSink>();
  return once_sink();
}

}  // namespace

std::vector<std::pair<std::string, uint64_t>> repeated_on_stderr() {
  return once_sink() ? once_sink()->repeated() : std::vector<std::pair<std::string, uint64_t>>{};
}

Status init(const Options& opts) {
  if (!valid_level(opts.level))
    return fail("unknown log level '", opts.level,
                "' (expected trace, debug, info, warn, error, critical or off)");
  if (!opts.stderr_level.empty() && !valid_level(opts.stderr_level))
    return fail("unknown log level '", opts.stderr_level, "'");
  std::vector<spdlog::sink_ptr> sinks;
  if (opts.to_stderr) {
    auto s = stderr_sink(opts);
    s->set_level(spdlog::level::from_str(opts.stderr_level.empty() ? opts.level
                                                                    : opts.stderr_level));
    s->set_formatter(make_formatter(opts));
    sinks.push_back(s);
  }
  if (!opts.file.empty()) {
    try {
      auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(opts.file, false);
      f->set_level(spdlog::level::from_str(opts.level));
      f->set_formatter(make_formatter(opts));
      sinks.push_back(f);
    } catch (const spdlog::spdlog_ex& e) {
      return fail("cannot open log file ", opts.file, ": ", e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("sal", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::from_str(opts.level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return {};
}

void shutdown() { spdlog::shutdown(); }

}  // namespace sal::log

namespace sal {

bool KindLog::allow(std::string_view kind, int64_t now_ns, uint64_t& suppressed) {
  auto find = [&](std::string_view name) -> Kind* {
    for (auto& x : kinds_)
      if (x.name == name) return &x;
    return nullptr;
  };
  Kind* k = find(kind);
  if (!k && kinds_.size() >= kMaxKinds) k = find("other");  // full: the rest share "other"
  if (!k) {
    kinds_.push_back({std::string(kinds_.size() < kMaxKinds ? kind : "other"), now_ns - quiet_ns_, 0});
    k = &kinds_.back();
  }
  if (now_ns - k->logged_ns < quiet_ns_) {
    ++k->counted;
    return false;
  }
  suppressed = k->counted;
  k->counted = 0;
  k->logged_ns = now_ns;
  return true;
}

std::string KindLog::more(uint64_t suppressed) {
  if (suppressed == 0) return "";
  return " (and " + std::to_string(suppressed) + " more like it since the last line)";
}

}  // namespace sal
