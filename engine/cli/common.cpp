// common.cpp — see common.h.
#include "cli/common.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>

#include <cstdio>

#include "core/http_bind.h"
#include "core/log.h"
#include "core/paths.h"
#include "core/strings.h"

namespace sal::cli {

Status setup_logging(const Parsed& p, const std::string& process, const std::string& file_override,
                     const std::string& stderr_level, bool stderr_once) {
  log::Options o;
  o.level = p.get_or("--log-level", "info");
  auto fmt = log::parse_format(p.get_or("--log-format", "plain"));
  if (!fmt) return Error("--log-format: " + fmt.error().message());
  o.format = *fmt;
  o.process = process;
  o.file = file_override.empty() ? p.get_or("--log-file", "") : file_override;
  o.stderr_level = stderr_level;
  o.stderr_once = stderr_once;
  if (auto s = log::init(o); !s) return Error("--log-level: " + s.error().message());
  return {};
}

Result<job::JobConfig> load_job(const std::optional<std::string>& path, const job::Overrides& sets) {
  if (!path) return job::load_embedded_default(sets);
  return job::load_file(*path, sets);
}

Result<job::Overrides> job_overrides(const Parsed& p) { return key_values("--set", p.get_or("--set", "")); }

Result<job::Overrides> steps_override(const Parsed& p, std::optional<int64_t> drill_steps) {
  auto steps = p.get_int("--steps", drill_steps.value_or(-1), 0, INT64_MAX);
  if (!steps) return steps.error();
  if (*steps < 0) return job::Overrides{};
  const std::string value = std::to_string(*steps);
  const std::string source = p.has("--steps") ? "--steps " + value : "the drill's steps = " + value;
  auto sets = job_overrides(p);
  if (!sets) return sets.error();
  for (const auto& [key, set] : *sets)
    if (key == "train.steps" && set != value)
      return fail(source, " and --set train.steps=", set, " disagree: give the job's steps once");
  return job::Overrides{{"train.steps", value}};
}

Result<std::optional<drill::DrillSpec>> drill_option(const Parsed& p, std::function<void()> service) {
  auto path = p.get("--drill");
  if (!path) {
    if (p.has("--drill-arg")) return fail("--drill-arg goes with --drill");
    return std::optional<drill::DrillSpec>();
  }
  auto kvs = key_values("--drill-arg", p.get_or("--drill-arg", ""));
  if (!kvs) return kvs.error();
  auto spec = drill::load_drill(*path, std::map<std::string, std::string>(kvs->begin(), kvs->end()), std::move(service));
  if (!spec) return spec.error();
  return std::optional(std::move(*spec));
}

EventLoop::EventLoop() { uv_loop_init(&loop_); }

EventLoop::~EventLoop() { close(); }

void EventLoop::run() { uv_run(&loop_, UV_RUN_DEFAULT); }
void EventLoop::stop() { uv_stop(&loop_); }

void EventLoop::on_signals(std::function<void(int)> fn, bool sigint) {
  on_signal_ = std::move(fn);
  for (auto* slot : {&sigint_, &sigterm_}) {
    if (slot == &sigint_ && !sigint) continue;
    *slot = std::make_unique<uv_signal_t>();
    uv_signal_init(&loop_, slot->get());
    (*slot)->data = this;
    uv_signal_start(slot->get(), [](uv_signal_t* h, int sig) {
      auto* self = static_cast<EventLoop*>(h->data);
      if (self->on_signal_) self->on_signal_(sig);
    }, slot == &sigint_ ? SIGINT : SIGTERM);
  }
}

void EventLoop::close() {
  if (closed_) return;
  closed_ = true;
  for (auto* slot : {&sigint_, &sigterm_})
    if (*slot) uv_close(reinterpret_cast<uv_handle_t*>(slot->get()), nullptr);
  // Let every pending close callback run, then close whatever is still open.
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_walk(&loop_, [](uv_handle_t* h, void*) {
    if (!uv_is_closing(h)) uv_close(h, nullptr);
  }, nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
}

int usage_error(const Command& cmd, const std::string& message) {
  std::fprintf(stderr, "salamander %s: %s\n", cmd.name.c_str(), message.c_str());
  return 2;
}

Result<std::string> make_run_dir(const std::string& base, const std::string& job) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string dir = base + "/" + job + "-" + stamp;
  SAL_TRY(make_dirs(base));
  for (int i = 1; i < 1000; ++i) {
    if (mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST) return fail("cannot create ", dir, ": ", std::strerror(errno));
    dir = base + "/" + job + "-" + stamp + "-" + std::to_string(i);
  }
  return fail("cannot create a run directory under ", base);
}

namespace {

// Whether `item` starts a new KEY=VALUE: a key of letters, digits, '_', '.', '*' or '-', then '='.
bool starts_key(std::string_view item) {
  const size_t eq = item.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  for (char c : trim(item.substr(0, eq)))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '*' && c != '-') return false;
  return true;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> key_values(const std::string& option, const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : split(text, ',')) {
    if (item.empty()) continue;
    if (!starts_key(item)) {
      // a comma inside a value (mesh.devices=cuda:0,1): the item goes on the value before it
      if (out.empty()) return fail(option, ": expected KEY=VALUE, got '", item, "'");
      out.back().second += "," + std::string(trim(item));
      continue;
    }
    auto eq = item.find('=');
    out.emplace_back(std::string(trim(item.substr(0, eq))), std::string(trim(item.substr(eq + 1))));
  }
  return out;
}

Status metrics_option(const Parsed& p, job::JobConfig& job) {
  auto text = p.get("--metrics");
  if (!text) return {};
  if (auto b = parse_http_bind(*text); !b) return Error("--metrics: " + b.error().message());
  job.metrics.bind = *text;
  return {};
}

Result<double> cpu_share_option(const Parsed& p) {
  auto text = p.get("--cpu-share");
  if (!text) return 0.0;
  auto f = parse_double(*text);
  if (!f || !(*f > 0) || *f > 64) return fail("--cpu-share takes CPUs per worker in (0, 64], got '", *text, "'");
  return *f;
}

}  // namespace sal::cli
