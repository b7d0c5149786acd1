// load.cpp — evaluates a job file in a sandbox (no API, strict globals, 1 s and 32 MiB budget)
// and checks the table it returns against the schema.
#include <lua.hpp>

#include <algorithm>

#include "core/devices.h"
#include "core/load_trace.h"
#include "core/paths.h"
#include "core/strings.h"
#include "job/config.h"
#include "job/overrides.h"
#include "job/schema.h"
#include "lua/sandbox.h"

namespace sal::job {
namespace {

constexpr size_t kMaxJobFileBytes = 1u << 20;
constexpr int64_t kJobEvalBudgetMs = 1000;
constexpr size_t kJobMemoryLimit = 32u << 20;

std::string stem(const std::string& path) {
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  auto dot = base.rfind(".lua");
  return dot == std::string::npos ? base : base.substr(0, dot);
}

}  // namespace

Result<JobConfig> load_text(const std::string& text, const std::string& label,
                            const std::string& dir) {
  lua::Sandbox sb({.name = "job " + label, .memory_limit = kJobMemoryLimit});
  if (auto s = sb.load(text, "@" + label); !s) return Error(s.error().message());
  if (auto s = sb.call(0, 1, {.deadline_ms = kJobEvalBudgetMs, .what = "job file budget"}); !s)
    return Error(label + ": " + s.error().message());
  JobConfig job;
  job.file = label;
  job.dir = dir;
  job.text = text;
  if (auto s = validate_table(sb.L(), -1, job); !s) {
    std::string lines;  // every error on a line of its own, each naming the file
    for (const auto& line : split(s.error().message(), '\n')) lines += (lines.empty() ? "" : "\n") + label + ": " + line;
    return Error(lines);
  }
  if (job.name.empty()) job.name = stem(label);
  return job;
}

Result<JobConfig> load_file(const std::string& path, const Overrides& sets) {
  auto text = read_file(path, kMaxJobFileBytes);
  if (!text) return Error("job file " + text.error().message());
  auto with = apply_overrides(*text, sets);
  if (!with) return with.error().with_context(path);
  return load_text(*with, path, absolute_path(dir_name(path)));
}

std::string resolve_path(const JobConfig& job, const std::string& path) {
  if (path.empty() || path[0] == '/' || job.dir.empty()) return path;
  return job.dir + "/" + path;
}

namespace {

// model.routing_trace: every file readable, each layer with model.experts counts.
Status check_routing_trace(const JobConfig& job) {
  if (job.model.routing_trace.empty()) return {};
  const std::string path = resolve_path(job, job.model.routing_trace);
  auto steps = read_load_trace(path);
  if (!steps) return steps.error().with_context(job.file + ": model.routing_trace");
  for (const auto& s : *steps)
    if (s.loads[0].size() != size_t(job.model.experts))
      return fail(job.file, ": model.routing_trace: ", s.files[0], " has ", s.loads[0].size(),
                  " experts per layer; model.experts is ", job.model.experts);
  return {};
}

}  // namespace

int64_t sparse_peer_copies(const JobConfig& job) {
  return job.train.recovery == "elastic" ? job.train.peer_copies : 0;
}

int64_t upstream_log_copies(const JobConfig& job) {
  const int64_t peers = sparse_peer_copies(job);
  return job.train.log_copies == 0 ? peers : std::min(job.train.log_copies, peers);
}

Result<int64_t> starting_workers(const JobConfig& job) {
  auto devices = parse_devices(job.mesh.devices);
  if (!devices) return Error("mesh.devices: " + devices.error().message());
  return int64_t(devices->size()) * job.mesh.nodes;
}

Status check_first_plan(const JobConfig& job) {
  auto workers = starting_workers(job);
  if (!workers) return workers.error();
  if (job.parallel.groups > 1 || *workers * job.policies.slots >= job.model.experts) return {};
  return fail(*workers, " worker(s) (", job.mesh.nodes, " nodes x mesh.devices = \"", job.mesh.devices,
              "\") x policies.slots = ", job.policies.slots, " cannot hold the ", job.model.experts,
              " experts of a whole model once, so the first plan could never be made: start more nodes (--nodes, "
              "mesh.nodes) or raise policies.slots");
}

Status check_data(const JobConfig& job) {
  SAL_TRY(check_routing_trace(job));
  const std::string data = resolve_path(job, job.data.path);
  if (!path_exists(data))
    return fail(job.file, ": data.path: ", data, " does not exist",
                job.data.path == kDefaultDataPath
                    ? " (the default corpus: install Debian's `fortunes` package; scripts/dev.sh does)"
                    : "");
  if (!job.data.tokenizer.empty() && !path_exists(resolve_path(job, job.data.tokenizer)))
    return fail(job.file, ": data.tokenizer: ", resolve_path(job, job.data.tokenizer), " does not exist");
  return {};
}

Result<JobConfig> load_embedded_default(const Overrides& sets) {
  const std::string label = "<embedded scripts/jobs/quickstart.lua>";
  auto with = apply_overrides(embedded_default_text(), sets);
  if (!with) return with.error().with_context(label);
  auto job = load_text(*with, label, absolute_path("."));
  if (job.ok()) job->name = "quickstart";
  return job;
}

}  // namespace sal::job
