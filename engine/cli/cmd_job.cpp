// cmd_job.cpp — `salamander job check FILE.lua` and `salamander job schema [--markdown]`.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"

namespace sal::cli {

int cmd_job(const Args& args) {
  Command cmd{"job", "job check FILE.lua [--set PATH=VALUE,...] | job schema [--markdown]",
              "Checks a job file against the schema (every error at once, then that its data.path exists), or "
              "prints the schema (every key, its rule and default).",
              {{"--markdown", "", "schema as a Markdown table (docs/job-file.md)"}, {"--set", "PATH=VALUE,...", kSetHelp}},
              2};
  int code = 0;
  auto p = parse_command(cmd, args, code, Positional::required);
  if (!p) return code;
  const std::string& verb = p->positional[0];
  if (verb == "schema") {
    std::fputs(job::schema_table(p->has("--markdown")).c_str(), stdout);
    return 0;
  }
  if (verb == "check") {
    if (p->positional.size() < 2) return usage_error(cmd, "job check needs a FILE.lua");
    auto sets = job_overrides(*p);
    if (!sets) return usage_error(cmd, sets.error().message());
    auto j = job::load_file(p->positional[1], *sets);
    if (!j) {
      std::fprintf(stderr, "%s\n", j.error().message().c_str());
      return 1;
    }
    if (auto s = job::check_data(*j); !s) {  // what the controller checks at start
      std::fprintf(stderr, "%s\n", s.error().message().c_str());
      return 1;
    }
    std::printf("%s: ok (job '%s': %lld nodes x %s, %lld steps)\n", p->positional[1].c_str(), j->name.c_str(),
                (long long)j->mesh.nodes, j->mesh.devices.c_str(), (long long)j->train.steps);
    return 0;
  }
  return usage_error(cmd, "unknown job command '" + verb + "' (expected check or schema)");
}

}  // namespace sal::cli
