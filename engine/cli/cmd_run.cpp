// cmd_run.cpp — `salamander run [JOB.lua]`: a job on a local mesh, this process its controller
// (its options: the table in command_table.cpp) — or, with --supervise or a drill that needs it,
// its controller a child process this one brings back when it dies (hosted_run.h).
// With --modes the job runs once per recovery mode (train.recovery), each in <out>/<mode>, and
// <out>/compare.html puts them side by side; --repeat N runs the modes N times over, alternating
// (<out>/<mode>/run-K), and compare.html, compare.json and the terminal give each mode's medians.
#include <signal.h>

#include <cstdio>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <zmq.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/hosted_run.h"
#include "cli/local_run.h"
#include "cli/resume_job.h"
#include "ckpt/format.h"
#include "core/paths.h"
#include "core/strings.h"
#include "drill/drill_spec.h"
#include "report/report.h"

namespace sal::cli {
namespace {

Result<std::vector<std::string>> recovery_modes(const std::string& text) {
  static const std::vector<std::string> known{"elastic", "fixed-ep-ft", "checkpoint-restart"};
  std::vector<std::string> out;
  for (const auto& m : split(text, ',')) {
    if (std::find(known.begin(), known.end(), m) == known.end())
      return fail("--modes: '", m, "' is not a recovery mode", did_you_mean(m, known), " (", join(known, ", "), ")");
    out.push_back(m);
  }
  return out;
}

// --resume PATH: a checkpoint or complete snapshot directory (with its manifest), or a run
// directory (its final checkpoint, else its newest complete snapshot). Its model must be the job's,
// and its step before the steps to run.
Result<job::ResumeFrom> resume_source(const std::string& path, const job::JobConfig& job, int64_t steps) {
  auto resolved = ckpt::resolve_checkpoint(path);
  if (!resolved) return resolved.error().with_context("--resume");
  const std::string& dir = *resolved;
  auto m = ckpt::read_manifest(dir);
  if (!m) return m.error().with_context("--resume " + path);
  const std::pair<const char*, std::pair<int64_t, int64_t>> shape[] = {
      {"layers", {m->dims.layers, job.model.layers}},   {"d_model", {m->dims.d, job.model.d_model}},
      {"heads", {m->dims.heads, job.model.heads}},      {"experts", {m->dims.experts, job.model.experts}},
      {"top_k", {m->dims.top_k, job.model.top_k}},      {"seq_len", {m->dims.seq_len, job.model.seq_len}},
      {"vocab", {m->dims.vocab, job.model.vocab}}};
  for (const auto& [key, v] : shape)
    if (v.first != v.second && !(m->dims.llama() && std::string(key) == "seq_len"))  // moe-llama has no position table
      return fail("--resume ", dir, ": the checkpoint's model has ", key, " ", v.first, ", the job's model.", key, " is ",
                  v.second);
  // the family and its further shape (grouped-query width, expert widths, the head)
  const model::Dims want = job::model_dims(job.model);
  if (m->dims.family != want.family)
    return fail("--resume ", dir, ": the checkpoint's model is ", family_name(m->dims.family), ", the job's model.kind is ",
                job.model.kind);
  for (auto kind : {UnitKind::embedding, UnitKind::dense, UnitKind::gate, UnitKind::expert})
    if (unit_size(m->dims, kind) != unit_size(want, kind))
      return fail("--resume ", dir, ": the checkpoint's ", unit_kind_name(kind), " units hold ", unit_size(m->dims, kind),
                  " parameters, the job's model's ", unit_size(want, kind),
                  " (model.kv_heads, expert_ffn, shared_experts, shared_gate, tied_head, qk_norm, attn_bias, or "
                  "bias_update: a routing bias or none, differ)");
  if (steps > 0 && int64_t(m->step) >= steps)
    return fail("--resume ", dir, ": the checkpoint is of step ", m->step, ", not before the ", steps,
                " steps to run (raise --steps)");
  return job::ResumeFrom{absolute_path(dir), m->step};
}

struct RunOutcome {
  int code = 0;
  bool interrupted = false;  // by SIGINT or SIGTERM
};

// A drill that kills the controller or cuts links: the run hosts its controller as a child process
// (hosted_run.h), started with the job and drill options of this command line; for links, the
// mesh goes into network namespaces.
RunOutcome run_hosted(const LocalRunOptions& o, std::vector<std::string> args) {
  const bool netns = o.drill && o.drill->partitions();
  // the mode --modes runs, after the command line's own --set
  std::string recovery = "train.recovery=" + o.job.train.recovery;
  auto set = std::find(args.begin(), args.end(), "--set");
  if (set != args.end()) *std::next(set) += "," + recovery;
  else args.insert(args.end(), {"--set", recovery});
  EventLoop loop;
  HostedRun run(loop, HostedRunOptions{o, std::move(args), netns});
  if (auto s = run.start(); !s) {
    std::fprintf(stderr, "salamander run: %s\n", s.error().message().c_str());
    return {1, false};
  }
  loop.run();
  return {run.exit_code(), run.interrupted()};
}

// One local run (hosted: the controller's command line when it runs in a child process).
RunOutcome run_once(const LocalRunOptions& o, const std::optional<std::vector<std::string>>& hosted) {
  if (hosted) return run_hosted(o, *hosted);
  zmq::context_t ctx(1);
  EventLoop loop;
  LocalRun run(loop, ctx, o);
  if (auto s = run.start(); !s) {
    std::fprintf(stderr, "salamander run: %s\n", s.error().message().c_str());
    return {1, false};
  }
  loop.run();
  run.print_summary();
  return {run.exit_code(), run.interrupted()};
}

// The same job and drill once per recovery mode (`repeat` times over, the modes alternating so a
// machine's drift touches each alike), then the comparison page and the modes' medians.
int run_modes(LocalRunOptions o, const std::vector<std::string>& modes, int64_t repeat,
              const std::optional<std::vector<std::string>>& hosted) {
  std::string base = o.run_dir;
  std::vector<std::string> dirs;
  std::FILE* say = o.json ? stderr : stdout;
  int rc = 0;
  for (int64_t k = 1; k <= repeat; ++k)
    for (const auto& mode : modes) {
      o.job.train.recovery = mode;
      o.run_dir = base + "/" + mode + (repeat > 1 ? "/run-" + std::to_string(k) : "");
      if (auto s = make_dirs(o.run_dir); !s) {
        std::fprintf(stderr, "salamander run: %s\n", s.error().message().c_str());
        return 1;
      }
      if (repeat > 1) std::fprintf(say, "== %s (run %lld of %lld) ==\n", mode.c_str(), (long long)k, (long long)repeat);
      else std::fprintf(say, "== %s ==\n", mode.c_str());
      std::fflush(say);
      auto outcome = run_once(o, hosted);
      rc = std::max(rc, outcome.code);
      dirs.push_back(o.run_dir);
      if (outcome.interrupted) {
        std::fprintf(stderr, "salamander run: interrupted during the %s mode: the other runs are not made\n", mode.c_str());
        return rc;
      }
    }
  if (dirs.size() < 2) return rc;  // one mode run once: its own report is the page (nothing to compare)
  std::string table;
  if (auto s = report::write_comparison(dirs, base + "/compare.html", &table); !s) {
    std::fprintf(stderr, "salamander run: comparison not written: %s\n", s.error().message().c_str());
    return 1;
  }
  std::fprintf(say, "\n%s\ncomparison: %s/compare.html (medians and ranges in compare.json)\n", table.c_str(), base.c_str());
  return rc;
}

// The hosted controller's job and drill options: those of this command line.
std::vector<std::string> controller_args(const Parsed& p) {
  std::vector<std::string> out(p.positional.begin(), p.positional.end());
  for (const char* opt : {"--set", "--drill", "--drill-arg", "--repl", "--metrics"})
    if (auto v = p.get(opt)) out.insert(out.end(), {opt, *v});
  return out;
}

// kill{controller = true} needs the agents to outlive the controller's absence.
Status check_controller_kill(const drill::Action& a, const job::JobConfig& job) {
  if (a.restart_after_s * 1e3 + 2000 <= double(job.mesh.controller_grace_ms)) return {};
  return fail(a.where, ": kill: restart_after_s ", short_number(a.restart_after_s), " leaves the agents too little of mesh.controller_grace_ms (",
              job.mesh.controller_grace_ms, " ms): they would give up before the controller is back (raise "
              "mesh.controller_grace_ms, or restart sooner)");
}

// The job to run: JOB.lua (or the embedded default) with --set and the job's steps; with --resume,
// the job the run directory recorded unless one is given (resume_job.h). Prints which job resumes.
Result<job::JobConfig> job_to_run(const Parsed& p, const job::Overrides& sets, const job::Overrides& steps) {
  std::optional<std::string> file = p.positional.empty() ? std::nullopt : std::optional(p.positional[0]);
  auto from = p.get("--resume");
  if (!from) {
    job::Overrides all = sets;
    all.insert(all.end(), steps.begin(), steps.end());
    return load_job(file, all);
  }
  auto resumed = job_to_resume({*from, file, sets, steps, p.has("--resume-anyway")});
  if (!resumed) return resumed.error();
  if (!resumed->run_dir.empty())
    std::fprintf(stderr, "resuming job %s of %s\n", resumed->job.name.c_str(), resumed->run_dir.c_str());
  return std::move(resumed->job);
}

}  // namespace

int cmd_run(const Command& cmd, const Parsed& p) {
  auto drill = drill_option(p);
  if (!drill) {
    std::fprintf(stderr, "salamander run: %s\n", drill.error().message().c_str());
    return 1;
  }
  auto sets = job_overrides(p);
  if (!sets) return usage_error(cmd, sets.error().message());
  auto steps_set = steps_override(p, *drill ? (*drill)->steps : std::nullopt);
  if (!steps_set) return usage_error(cmd, steps_set.error().message());
  if (p.has("--resume-anyway") && !p.has("--resume")) return usage_error(cmd, "--resume-anyway goes with --resume");
  auto job = job_to_run(p, *sets, *steps_set);
  if (!job) {
    std::fprintf(stderr, "salamander run: %s\n", job.error().message().c_str());
    return p.has("--resume") ? 2 : 1;
  }
  std::optional<std::vector<std::string>> hosted;
  if (*drill) {
    if ((*drill)->initial_nodes) job->mesh.nodes = *(*drill)->initial_nodes;
    if (const auto* kill = (*drill)->controller_kill()) {
      if (auto s = check_controller_kill(*kill, *job); !s) {
        std::fprintf(stderr, "salamander run: %s\n", s.error().message().c_str());
        return 1;
      }
    }
    if ((*drill)->controller_kill() || (*drill)->partitions()) hosted = controller_args(p);
  }
  if (p.has("--supervise")) hosted = controller_args(p);
  std::vector<std::string> modes;
  if (auto m = p.get("--modes")) {
    auto parsed = recovery_modes(*m);
    if (!parsed) return usage_error(cmd, parsed.error().message());
    modes = *parsed;
  }
  auto repeat = p.get_int("--repeat", 1, 1, 100);
  if (!repeat) return usage_error(cmd, repeat.error().message());
  if (*repeat > 1 && modes.empty()) return usage_error(cmd, "--repeat runs the modes of --modes again: give --modes");
#ifndef SAL_HAVE_CUDA
  // The agents this run starts are local, so a build without CUDA can say now what they would.
  if (job->mesh.devices.rfind("cuda:", 0) == 0) {
    std::fprintf(stderr, "salamander run: mesh.devices %s: this build of salamander has no CUDA path (nvcc was not "
                 "found when it was built)\n", job->mesh.devices.c_str());
    return 1;
  }
#endif
  auto nodes = p.get_int("--nodes", job->mesh.nodes, 1, 1024);
  const int64_t steps = job->train.steps;  // --steps, else the drill's, else the job's (steps_override)
  if (!nodes) return usage_error(cmd, nodes.error().message());
  job->mesh.nodes = *nodes;
  // a drill that sets the nodes it starts with (a trace's) may start below capacity and add nodes
  if (!(*drill && (*drill)->initial_nodes)) {
    if (auto s = job::check_first_plan(*job); !s) {
      std::fprintf(stderr, "salamander run: %s\n", s.error().message().c_str());
      return 1;
    }
  }
  auto cpu_share = cpu_share_option(p);
  if (!cpu_share) return usage_error(cmd, cpu_share.error().message());
  if (auto r = p.get("--repl")) job->repl.bind = *r;
  if (auto s = metrics_option(p, *job); !s) return usage_error(cmd, s.error().message());
  std::optional<job::ResumeFrom> resume_from;
  if (auto from = p.get("--resume")) {
    if (hosted) return usage_error(cmd, "--resume: not with --supervise (or a drill that kills the controller or cuts links)");
    auto r = resume_source(*from, *job, steps);
    if (!r) return usage_error(cmd, r.error().message());
    resume_from = *r;
  }
  auto dir = p.get("--out") ? Result<std::string>(*p.get("--out")) : make_run_dir("runs", job->name);
  if (dir.ok()) {
    if (auto s = make_dirs(*dir); !s) dir = s.error();
  }
  if (!dir) return usage_error(cmd, "--out: " + dir.error().message());
  // The terminal shows the progress line and warnings; everything goes to controller.log.
  if (auto s = setup_logging(p, "controller", *dir + "/controller.log", "warn"); !s)
    return usage_error(cmd, s.error().message());
  signal(SIGPIPE, SIG_IGN);

  LocalRunOptions o{*job, steps, *dir, p.has("--json"), p.get_or("--log-level", "info"),
                    p.get_or("--log-format", "plain"), *drill, *cpu_share, resume_from};
  return modes.empty() ? run_once(o, hosted).code : run_modes(o, modes, *repeat, hosted);
}

}  // namespace sal::cli
