// cmd_controller.cpp — `salamander controller JOB.lua`: serve a job's controller until stopped.
// Prints its endpoints first ("mesh ENDPOINT", "repl ENDPOINT") so scripts can read them.
#include <signal.h>

#include <cstdio>
#include <zmq.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/paths.h"
#include "drill/runner.h"
#include "mesh/controller.h"

namespace sal::cli {

int cmd_controller(const Args& args) {
  Command cmd{"controller", "controller JOB.lua [options]",
              "Serves the controller of a job: agents join its mesh endpoint, operators its REPL.",
              {{"--mesh", "ENDPOINT", "mesh endpoint (default: the job's mesh.bind)"},
               {"--repl", "ENDPOINT", "REPL endpoint (default: the job's repl.bind)"},
               {"--steps", "N", "steps to drive, then stop (default: the job's train.steps)"},
               {"--out", "DIR", "write events.csv and audit.log into DIR"}},
              1};
  int code = 0;
  auto p = parse_command(cmd, args, code);
  if (!p) return code;
  if (p->positional.empty()) return usage_error(cmd, "a job file is required (e.g. scripts/jobs/quickstart.lua)");
  if (auto s = setup_logging(*p, "controller"); !s) return usage_error(cmd, s.error().message());
  auto job = load_job(p->positional[0]);
  if (!job) {
    std::fprintf(stderr, "salamander controller: %s\n", job.error().message().c_str());
    return 1;
  }
  if (auto m = p->get("--mesh")) job->mesh.bind = *m;
  if (auto r = p->get("--repl")) job->repl.bind = *r;
  auto steps = p->get_int("--steps", job->train.steps, 0, INT64_MAX);
  if (!steps) return usage_error(cmd, steps.error().message());
  mesh::ControllerOptions o{*job, *steps, p->get_or("--out", "")};
  if (!o.run_dir.empty()) {
    if (auto s = make_dirs(o.run_dir); !s) return usage_error(cmd, "--out: " + s.error().message());
  }
  signal(SIGPIPE, SIG_IGN);
  int rc = 0;
  {
    zmq::context_t ctx(1);
    EventLoop loop;
    mesh::Controller controller(loop.get(), ctx, o);
    auto stop = [&](const std::string& why) { controller.shutdown(why, [&] { loop.stop(); }); };
    controller.on_stop_requested = stop;
    loop.on_signals([&](int sig) {
      if (controller.stopping()) return loop.stop();  // second signal: leave now
      stop(sig == SIGINT ? "interrupted" : "terminated");
    });
    // Drills from the REPL (drill.start): kill, drain, freeze and faults work on any mesh; `add`
    // needs `salamander run`, which starts the nodes itself.
    std::unique_ptr<drill::DrillRunner> drill;
    controller.start_drill = [&](const std::string& path) -> Status {
      if (drill) return fail("drill '", drill->spec().name, "' is already running");
      auto spec = drill::load_drill(path, {}, [&] { controller.service(); });
      if (!spec) return spec.error();
      drill = std::make_unique<drill::DrillRunner>(controller, loop.get(), std::move(*spec));
      drill->start();
      return {};
    };
    controller.drill_status = [&] { return drill ? drill->status() : nlohmann::ordered_json(); };
    if (auto s = controller.start(); !s) {
      std::fprintf(stderr, "salamander controller: %s\n", s.error().message().c_str());
      return 1;
    }
    std::printf("mesh %s\nrepl %s\n", controller.mesh_endpoint().c_str(), controller.repl_endpoint().c_str());
    std::fflush(stdout);
    loop.run();
  }
  return rc;
}

}  // namespace sal::cli
