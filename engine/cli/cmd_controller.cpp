// cmd_controller.cpp — `salamander controller JOB.lua`: serve a job's controller until stopped;
// `salamander controller --resume RUN_DIR`: bring a dead controller's job back from its journal
// (the job, the mesh endpoint the agents reconnect to, the committed steps, the plan in force).
// Prints its endpoints first ("mesh ENDPOINT", "repl ENDPOINT", and "metrics URL" when metrics.bind
// is set) so scripts can read them, then the progress line, and at the end the summary,
// summary.json and report.html, as `salamander run` does. Without a job file it serves the embedded
// default, as `run` does. With --drill it runs a failure drill; a resumed controller goes on with
// the drill its journal names. --host-fd links it to the `salamander run` that hosts it
// (cli/host_link.h): a drill's `add` and kill{controller = true} are asked of the host.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <zmq.hpp>

#include "cli/attachments.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/host_link.h"
#include "cli/progress.h"
#include "cli/run_summary.h"
#include "core/clock.h"
#include "core/lifetime.h"
#include "core/paths.h"
#include "drill/runner.h"
#include "mesh/controller.h"
#include "mesh/journal_file.h"
#include "mesh/timer.h"
#include "sim/jobs.h"

namespace sal::cli {
namespace {

// The job a journal recorded, with the endpoint its agents know, and the journal itself.
Result<std::pair<job::JobConfig, job::JournalState>> resumed_job(const std::string& run_dir) {
  auto state = mesh::read_journal_file(run_dir);
  if (!state) return state.error();
  if (state->ended) return fail(run_dir, ": the job is over (", *state->ended, "): there is nothing to resume");
  auto job = job::load_text(state->job->text, state->job->file, state->job->dir);
  if (!job) return job.error().with_context(run_dir + "/journal.jsonl: the job");
  job->name = state->job->name;
  job->mesh.bind = state->job->mesh;
  return std::pair{std::move(*job), std::move(*state)};
}

// --server-key and --allow replace the job's security section (a launch script keeps its keys
// apart from the job file); like the job's keys, they go together.
Status security_options(const Parsed& p, job::SecurityConfig& security) {
  auto key = p.get("--server-key");
  auto allow = p.get("--allow");
  if (!key && !allow) return {};
  if (!key || !allow) return fail("--server-key and --allow go together (CURVE needs the server's key and the allowlist)");
  security.server_key = *key;
  security.allow = *allow;
  return {};
}

// The drill to run: --drill, else the one a resumed job's journal names.
Result<std::optional<drill::DrillSpec>> controller_drill(const Parsed& p, const std::optional<job::DrillProgress>& resumed) {
  if (!resumed || p.has("--drill")) return drill_option(p);
  auto spec = drill::load_drill(resumed->drill.file, resumed->drill.args);
  if (!spec) return spec.error().with_context("the journal's drill");
  return std::optional(std::move(*spec));
}

// --host-fd: the drill's `add`, kill{controller = true} and partition{} become requests to the
// hosting run (a partition only where it put the mesh in network namespaces: --host-netns).
void link_to_host(mesh::Controller& c, int fd, bool netns) {
  c.add_nodes = [fd](int count) { return send_host_request(fd, {HostRequest::Kind::add, count}); };
  c.restart_controller = [fd](double after_s) {
    return send_host_request(fd, {HostRequest::Kind::restart, int64_t(after_s * 1e3)});
  };
  if (netns)
    c.partition_node = [fd](const std::string& node, uint64_t ms) {
      if (node.empty() || node.find_first_of(" \n") != std::string::npos)
        return Status(fail("node name '", node, "' cannot be named to the host"));
      return send_host_request(fd, {HostRequest::Kind::cut, int64_t(ms), node});
    };
}

// The end of a served job, as `salamander run` ends: the drill's expectations (a failed one makes
// the exit code 1), summary.json and report.html, then the summary on stdout.
int summarize(RunView v, const drill::DrillRunner* drill, bool json) {
  if (drill) v.expectations = drill->check();
  if (v.exit_code == 0 && std::any_of(v.expectations.begin(), v.expectations.end(), [](const auto& e) { return !e.ok; }))
    v.exit_code = 1;
  auto j = run_summary(v);
  if (auto s = write_run_outputs(v, j); !s) std::fprintf(stderr, "not written: %s\n", s.error().message().c_str());
  if (json) {
    std::puts(j.dump().c_str());
  } else {
    print_text_summary(v, j);
  }
  std::fflush(stdout);
  return v.exit_code;
}

// What the command line asks of the controller it serves.
struct Serving {
  mesh::ControllerOptions options;
  std::optional<drill::DrillSpec> drill;      // --drill, or the journal's
  const job::DrillProgress* drill_progress;   // what of it ran before a restart (null: a new drill)
  int host_fd = -1;                           // --host-fd
  bool host_netns = false;                    // --host-netns
  bool json = false;
};

// Serves the job until it is over: endpoints first, then the progress line, then the summary.
int serve(Serving s) {
  const mesh::ControllerOptions& o = s.options;
  const int64_t steps = o.max_steps;
  int rc = 0;
  zmq::context_t ctx(1);
  EventLoop loop;
  mesh::Controller controller(loop.get(), ctx, o);
  // The run as `salamander run` shows it: a progress line, then the summary (run_summary.h).
  ProgressLine progress(s.json ? stderr : stdout);
  mesh::Timer progress_timer(loop.get());
  std::string stop_reason;
  int64_t finished_ns = 0;
  std::optional<int> interrupt_code;
  std::unique_ptr<drill::DrillRunner> drill;
  auto view = [&] {
    return RunView{controller, steps, controller.started_ns(), finished_ns, o.run_dir, stop_reason, rc,
                   drill ? drill->spec().name : "", std::nullopt, {}};
  };
  controller.on_stop_requested = [&](const std::string& why) {
    stop_reason = why;
    finished_ns = mono_ns();
    rc = interrupt_code.value_or(controller.driver().failure().empty() ? 0 : 1);
    controller.shutdown(why, [&] { loop.stop(); });
  };
  controller.on_change = [&] { progress.update(status_line(view()), false); };
  // The first signal aborts the step in flight and writes the final checkpoint, then stops the
  // mesh; a second one stops the mesh now; a third leaves.
  loop.on_signals([&](int sig) {
    if (controller.stopping()) return loop.stop();
    if (!interrupt_code) interrupt_code = sig == SIGINT ? 130 : 143;
    controller.request_stop(sig == SIGINT ? "interrupted" : "terminated");
  });
  // Drills from the REPL (drill.start): kill, drain, freeze and faults work on any mesh; `add`
  // needs `salamander run`, which starts the nodes itself.
  auto fits_job = [&](const drill::DrillSpec& d) {
    const auto& job = controller.job();
    return drill::check_for_job(d, job.file, job.faults.inject, job::model_shape(job.model));
  };
  controller.prepare_drill = [&](const std::string& path) -> Result<std::function<Status()>> {
    auto spec = drill::load_drill(path, {});  // off the loop: no mesh to serve
    if (!spec) return spec.error();
    SAL_TRY(fits_job(*spec));
    return std::function<Status()>([&, spec = std::move(*spec)]() mutable -> Status {
      if (drill) return fail("drill '", drill->spec().name, "' is already running");
      drill = std::make_unique<drill::DrillRunner>(controller, loop.get(), std::move(spec));
      drill->start();
      return {};
    });
  };
  controller.drill_status = [&] { return drill ? drill->status() : nlohmann::ordered_json(); };
  if (s.host_fd >= 0) link_to_host(controller, s.host_fd, s.host_netns);
  if (auto st = s.drill ? fits_job(*s.drill) : Status{}; !st) {
    std::fprintf(stderr, "salamander controller: %s\n", st.error().message().c_str());
    return 1;
  }
  if (auto st = controller.start(); !st) {
    std::fprintf(stderr, "salamander controller: %s\n", st.error().message().c_str());
    return 1;
  }
  if (s.drill) {
    drill = std::make_unique<drill::DrillRunner>(controller, loop.get(), std::move(*s.drill), s.drill_progress);
    drill->start();
  }
  std::printf("mesh %s\nrepl %s\n", controller.mesh_endpoint().c_str(), controller.endpoint("repl").c_str());
  if (auto url = controller.endpoint("metrics"); !url.empty()) std::printf("metrics %s\n", url.c_str());
  std::fflush(stdout);
  progress_timer.start(1000, 1000, [&] { progress.update(status_line(view()), false); });
  loop.run();
  progress_timer.stop();
  progress.finish();
  if (!finished_ns) finished_ns = mono_ns();
  return summarize(view(), drill.get(), s.json);
}

// The job to serve: the job file's (or the embedded default), or the journal's with --resume.
Result<std::pair<job::JobConfig, std::optional<job::JournalState>>> controller_job(const Parsed& p,
                                                                                 const job::Overrides& sets) {
  if (auto dir = p.get("--resume")) {
    auto r = resumed_job(*dir);
    if (!r) return r.error();
    return std::pair{std::move(r->first), std::optional(std::move(r->second))};
  }
  auto job = load_job(p.positional.empty() ? std::nullopt : std::optional(p.positional[0]), sets);
  if (!job) return job.error();
  return std::pair{std::move(*job), std::optional<job::JournalState>()};
}

}  // namespace

int cmd_controller(const Command& cmd, const Parsed& p) {
  auto resume_dir = p.get("--resume");
  if (!p.positional.empty() && resume_dir) return usage_error(cmd, "--resume takes the job from the journal: no job file");
  auto sets = job_overrides(p);
  if (!sets) return usage_error(cmd, sets.error().message());
  if (resume_dir && !sets->empty()) return usage_error(cmd, "--resume takes the job from the journal: no --set");
  if (!resume_dir) {  // --steps is the job's length: its learning-rate schedule's too
    auto steps = steps_override(p, std::nullopt);
    if (!steps) return usage_error(cmd, steps.error().message());
    sets->insert(sets->end(), steps->begin(), steps->end());
  }
  // A run that put its mesh in network namespaces of this host (--host-netns: a drill's partition)
  // has its data plane on veth pairs it made itself: a private network, which it states for the job.
  if (p.has("--host-netns") && !resume_dir) sets->emplace_back("security.private_network", "true");
  auto host_fd = p.get_int("--host-fd", -1, 3, 1024);
  auto parent = p.get_int("--parent-pid", 0, 0, INT32_MAX);
  if (!host_fd) return usage_error(cmd, host_fd.error().message());
  if (!parent) return usage_error(cmd, parent.error().message());
  die_with_parent(pid_t(*parent));
  // hosted by `salamander run`: its terminal shows the progress line and warnings, as run's does
  if (auto s = setup_logging(p, "controller", "", *host_fd >= 0 ? "warn" : ""); !s)
    return usage_error(cmd, s.error().message());
  auto loaded = controller_job(p, *sets);
  if (!loaded) {
    std::fprintf(stderr, "salamander controller: %s\n", loaded.error().message().c_str());
    return 1;
  }
  auto& [job, journal] = *loaded;
  if (auto m = p.get("--mesh")) job.mesh.bind = *m;
  if (auto r = p.get("--repl")) job.repl.bind = *r;
  if (auto s = metrics_option(p, job); !s) return usage_error(cmd, s.error().message());
  if (auto s = security_options(p, job.security); !s) return usage_error(cmd, s.error().message());
  std::optional<job::DrillProgress> resumed_drill = journal ? journal->drill : std::nullopt;
  auto drill_spec = controller_drill(p, resumed_drill);
  if (!drill_spec) {
    std::fprintf(stderr, "salamander controller: %s\n", drill_spec.error().message().c_str());
    return 1;
  }
  int64_t default_steps = journal ? journal->job->max_steps
                          : *drill_spec && (*drill_spec)->steps ? *(*drill_spec)->steps
                                                                 : job.train.steps;
  auto steps = p.get_int("--steps", default_steps, 0, INT64_MAX);
  if (!steps) return usage_error(cmd, steps.error().message());
  sim::SimJobs sim_jobs;  // the REPL's sim.run jobs: outlive the controller
  Serving s{{job, *steps, p.get_or("--out", resume_dir.value_or(""))},
            std::move(*drill_spec),
            resumed_drill && !p.has("--drill") ? &*resumed_drill : nullptr,
            int(*host_fd),
            p.has("--host-netns"),
            p.has("--json")};
  s.options.resume = std::move(journal);
  s.options.attach = controller_attachments(job, s.options.run_dir, sim_jobs);
  if (!s.options.run_dir.empty()) {
    if (auto st = make_dirs(s.options.run_dir); !st) return usage_error(cmd, "--out: " + st.error().message());
  }
  signal(SIGPIPE, SIG_IGN);
  return serve(std::move(s));
}

}  // namespace sal::cli
