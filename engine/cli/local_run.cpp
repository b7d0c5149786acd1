// local_run.cpp — see local_run.h.
#include "cli/local_run.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "comm/shm_sweep.h"
#include "core/clock.h"
#include "core/paths.h"
#include "report/report.h"
#include "cli/attachments.h"

namespace sal::cli {

// After the controller's stop, agents get this long to exit before SIGKILL.
constexpr uint64_t kAgentExitGraceMs = 3000;

LocalRun::LocalRun(EventLoop& loop, zmq::context_t& ctx, LocalRunOptions opts)
    : loop_(loop),
      ctx_(ctx),
      opts_(std::move(opts)),
      progress_(opts_.json ? stderr : stdout),
      progress_timer_(loop.get()),
      reap_timer_(loop.get()) {}

mesh::SpawnOptions local_agent(const LocalRunOptions& o, const std::string& endpoint, size_t index, bool confined) {
  mesh::SpawnOptions so;
  so.exe = self_spawn_exe();
  // One name per node: the agent's, which events, job.nodes() and the report show, names its log.
  std::string name = "node" + std::to_string(index);
  so.args = {"agent", "--controller", endpoint, "--devices", o.job.mesh.devices,
             "--name", name, "--parent-pid", std::to_string(getpid()),
             "--log-level", o.log_level, "--log-format", o.log_format};
  if (confined) so.args.insert(so.args.end(), {"--cpu-share", std::to_string(o.cpu_share)});
  so.log_file = o.run_dir + "/" + name + ".log";
  return so;
}

std::optional<mesh::CpuShares> open_cpu_shares(double share) {
  if (share <= 0) return std::nullopt;
  auto shares = mesh::CpuShares::open(share);
  if (!shares) {
    std::fprintf(stderr, "cpu share: %s; the workers run unconfined\n", shares.error().message().c_str());
    return std::nullopt;
  }
  shares->prune_dead();
  return std::move(*shares);
}

void close_cpu_shares(const std::optional<mesh::CpuShares>& shares) {
  if (!shares) return;
  shares->prune_dead();  // the workers die with their agents
  shares->remove_if_empty();
}

LocalRun::~LocalRun() {
  kill_agents();
  close_cpu_shares(shares_);
  comm::sweep_ucx_segments_logged();
}

Status LocalRun::start() {
  shares_ = open_cpu_shares(opts_.cpu_share);
  started_ns_ = mono_ns();
  mesh::ControllerOptions o{opts_.job, opts_.steps, opts_.run_dir};
  o.from_checkpoint = opts_.resume_from;
  o.attach = controller_attachments(opts_.job, opts_.run_dir, sim_jobs_);
  controller_ = std::make_unique<mesh::Controller>(loop_.get(), ctx_, std::move(o));
  controller_->on_stop_requested = [this](const std::string& why) {
    begin_stop(why, interrupt_code_.value_or(controller_->driver().failure().empty() ? 0 : 1));
  };
  controller_->on_change = [this] { refresh(false); };
  SAL_TRY(controller_->start());
  FILE* out = opts_.json ? stderr : stdout;
  std::fprintf(out, "repl  %s\nmesh  %s\nlogs  %s\n", controller_->endpoint("repl").c_str(),
               controller_->mesh_endpoint().c_str(), opts_.run_dir.c_str());
  if (auto url = controller_->endpoint("metrics"); !url.empty()) std::fprintf(out, "metrics  %s\n", url.c_str());
  std::fflush(out);
  loop_.on_signals([this](int sig) { on_signal(sig); });
  controller_->add_nodes = [this](int count) { return add_agents(count); };
  controller_->prepare_drill = [this](const std::string& path) -> Result<std::function<Status()>> {
    auto spec = drill::load_drill(path, {});  // off the loop: no mesh to serve
    if (!spec) return spec.error();
    return std::function<Status()>([this, spec = std::move(*spec)]() mutable { return start_drill(std::move(spec)); });
  };
  controller_->drill_status = [this] { return drill_ ? drill_->status() : nlohmann::ordered_json(); };
  if (opts_.drill) SAL_TRY(start_drill(*opts_.drill));
  std::string why;
  for (size_t i = 0; i < size_t(opts_.job.mesh.nodes); ++i)
    if (auto s = spawn_agent(i); !s) why = s.error().message();
  progress_timer_.start(100, 100, [this] { refresh(false); });
  if (!any_agent_running()) begin_stop("no node could be started (" + why + ")", 1);  // nothing would ever join
  return {};
}

bool LocalRun::any_agent_running() const {
  for (const auto& a : agents_)
    if (a && a->running()) return true;
  return false;
}

Status LocalRun::spawn_agent(size_t i) {
  auto proc = std::make_unique<mesh::ChildProcess>(
      loop_.get(), [this, i](int64_t code, int sig) { on_agent_exit(i, code, sig); });
  auto so = local_agent(opts_, controller_->mesh_endpoint(), i, shares_.has_value());
  Status s = proc->spawn(so);
  if (!s) spdlog::error("agent {}: {}", i, s.error().message());
  if (agents_.size() <= i) agents_.resize(i + 1);
  agents_[i] = std::move(proc);
  return s;
}

Status LocalRun::add_agents(int count) {
  if (stopping_) return fail("the run is stopping");
  for (int i = 0; i < count; ++i) SAL_TRY(spawn_agent(agents_.size()));
  return {};
}

Status LocalRun::start_drill(drill::DrillSpec spec) {
  if (drill_) return fail("drill '", drill_->spec().name, "' is already running");
  const auto& job = controller_->job();
  SAL_TRY(drill::check_for_job(spec, job.file, job.faults.inject, job::model_shape(job.model)));
  drill_ = std::make_unique<drill::DrillRunner>(*controller_, loop_.get(), std::move(spec));
  drill_->start();
  return {};
}

void LocalRun::on_agent_exit(size_t i, int64_t code, int sig) {
  if (stopping_) {
    spdlog::info("agent {} exited (code {}, signal {})", i, code, sig);
  } else {
    spdlog::warn("agent {} exited unexpectedly (code {}, signal {})", i, code, sig);
  }
  if (stopping_) return wait_for_agents();
  if (!any_agent_running()) begin_stop("every node is gone", 1);
}

// The first interrupt aborts the step in flight, writes the final checkpoint and stops the mesh
// (Controller::request_stop); a second one while that checkpoint is written stops the mesh at
// once; one more kills the local mesh.
void LocalRun::on_signal(int sig) {
  interrupted_ = true;
  if (stopping_) {
    progress_.finish();
    std::fprintf(stderr, "interrupted again: killing the local mesh now\n");
    kill_agents();
    exit_code_ = 130;
    loop_.stop();
    return;
  }
  const bool again = interrupt_code_.has_value();
  if (!again) interrupt_code_ = sig == SIGINT ? 130 : 143;
  progress_.finish();
  std::fprintf(stderr, again ? "interrupted again: stopping without the final checkpoint\n"
                             : "stopping: the final checkpoint first (interrupt again to skip it)\n");
  controller_->request_stop(sig == SIGINT ? "interrupted (Ctrl-C)" : "terminated");
}

void LocalRun::begin_stop(const std::string& why, int code) {
  if (stopping_) return;
  stopping_ = true;
  stop_reason_ = why;
  exit_code_ = code;
  finished_ns_ = mono_ns();
  refresh(true);
  controller_->shutdown(why, [this] {
    controller_stopped_ = true;
    wait_for_agents();
  });
  reap_timer_.start(kAgentExitGraceMs + 3000, 0, [this] {
    spdlog::warn("agents still running {} ms after the stop; killing them", kAgentExitGraceMs + 3000);
    kill_agents();
    loop_.stop();
  });
}

// The loop stops once the controller has heard every node out and every agent process has exited:
// an agent's exit can be seen before its last messages (worker exits, goodbye) are read.
void LocalRun::wait_for_agents() {
  if (!controller_stopped_) return;
  for (auto& a : agents_)
    if (a && a->running()) return;
  reap_timer_.stop();
  progress_timer_.stop();
  loop_.stop();
}

void LocalRun::kill_agents() {
  for (auto& a : agents_)
    if (a && a->running()) a->signal(SIGKILL);
}

RunView LocalRun::view() const {
  return RunView{*controller_, opts_.steps, started_ns_, finished_ns_, opts_.run_dir, stop_reason_, exit_code_,
                 drill_ ? drill_->spec().name : "", shares_ ? std::optional<double>(shares_->share()) : std::nullopt,
                 expectations_};
}

void LocalRun::refresh(bool force) {
  if (!controller_) return;
  progress_.update(status_line(view()), force);
}

void LocalRun::print_summary() {
  progress_.finish();
  if (drill_) {
    expectations_ = drill_->check();
    bool all = std::all_of(expectations_.begin(), expectations_.end(), [](const auto& e) { return e.ok; });
    if (!all && exit_code_ == 0) exit_code_ = 1;
  }
  const RunView v = view();
  auto j = run_summary(v);
  if (auto s = write_run_outputs(v, j); !s) std::fprintf(stderr, "not written: %s\n", s.error().message().c_str());
  if (opts_.json) {
    std::puts(j.dump().c_str());
  } else {
    print_text_summary(v, j);
  }
  std::fflush(stdout);
}

}  // namespace sal::cli
