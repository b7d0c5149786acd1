// cmd_run.cpp — `salamander run [JOB.lua] [--nodes N] [--steps S] [--repl ENDPOINT] [--json]`.
#include <signal.h>

#include <cstdio>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <zmq.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/local_run.h"
#include "core/paths.h"

namespace sal::cli {
namespace {

// runs/<job>-<YYYYmmdd-HHMMSS>[-N], created.
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

}  // namespace

int cmd_run(const Args& args) {
  Command cmd{"run", "run [JOB.lua] [options]",
              "Runs a job on a local mesh: this process is the controller, and it starts the job's "
              "agents (mesh.nodes) as child processes on loopback. Without JOB.lua it runs the "
              "embedded default (scripts/jobs/quickstart.lua). Prints the REPL endpoint first.",
              {{"--nodes", "N", "local agents to start (default: the job's mesh.nodes)"},
               {"--steps", "S", "steps to run (default: the job's train.steps; 0: idle until stopped)"},
               {"--repl", "ENDPOINT", "where the REPL listens (default: the job's repl.bind)"},
               {"--out", "DIR", "run directory (default: runs/<job>-<time>)"},
               {"--json", "", "end with one JSON summary object on stdout"}},
              1};
  auto p = parse(cmd, args);
  if (!p) return usage_error(cmd, p.error().message());
  if (p->has("--help")) return std::fputs(usage(cmd).c_str(), stdout), 0;
  auto job = load_job(p->positional.empty() ? std::nullopt : std::optional(p->positional[0]));
  if (!job) {
    std::fprintf(stderr, "salamander run: %s\n", job.error().message().c_str());
    return 1;
  }
  auto nodes = p->get_int("--nodes", job->mesh.nodes, 1, 1024);
  auto steps = p->get_int("--steps", job->train.steps, 0, INT64_MAX);
  if (!nodes) return usage_error(cmd, nodes.error().message());
  if (!steps) return usage_error(cmd, steps.error().message());
  job->mesh.nodes = *nodes;
  if (auto r = p->get("--repl")) job->repl.bind = *r;
  auto dir = p->get("--out") ? Result<std::string>(*p->get("--out")) : make_run_dir("runs", job->name);
  if (dir.ok()) {
    if (auto s = make_dirs(*dir); !s) dir = s.error();
  }
  if (!dir) return usage_error(cmd, "--out: " + dir.error().message());
  // The terminal shows the progress line and warnings; everything goes to controller.log.
  if (auto s = setup_logging(*p, "controller", *dir + "/controller.log", "warn"); !s)
    return usage_error(cmd, s.error().message());
  signal(SIGPIPE, SIG_IGN);

  LocalRunOptions o{*job, *steps, *dir, p->has("--json"), p->get_or("--log-level", "info"),
                    p->get_or("--log-format", "plain")};
  int rc = 0;
  {
    zmq::context_t ctx(1);
    EventLoop loop;
    LocalRun run(loop, ctx, o);
    if (auto s = run.start(); !s) {
      std::fprintf(stderr, "salamander run: %s\n", s.error().message().c_str());
      return 1;
    }
    loop.run();
    run.print_summary();
    rc = run.exit_code();
  }
  return rc;
}

}  // namespace sal::cli
