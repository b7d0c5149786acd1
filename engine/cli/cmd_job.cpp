// cmd_job.cpp — `salamander job check FILE.lua` and `salamander job schema [--markdown]`.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"

namespace sal::cli {

int job_check(const Command& cmd, const Parsed& p) {
  auto sets = job_overrides(p);
  if (!sets) return usage_error(cmd, sets.error().message());
  auto j = job::load_file(p.positional[0], *sets);
  if (!j) {
    std::fprintf(stderr, "%s\n", j.error().message().c_str());
    return 1;
  }
  if (auto s = job::check_data(*j); !s) {  // what the controller checks at start
    std::fprintf(stderr, "%s\n", s.error().message().c_str());
    return 1;
  }
  std::printf("%s: ok (job '%s': %lld nodes x %s, %lld steps)\n", p.positional[0].c_str(), j->name.c_str(),
              (long long)j->mesh.nodes, j->mesh.devices.c_str(), (long long)j->train.steps);
  return 0;
}

int job_schema(const Command&, const Parsed& p) {
  std::fputs(job::schema_table(p.has("--markdown")).c_str(), stdout);
  return 0;
}

}  // namespace sal::cli
