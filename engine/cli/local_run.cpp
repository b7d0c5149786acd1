// local_run.cpp — see local_run.h.
#include "cli/local_run.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/paths.h"
#include "mesh/training.h"

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

LocalRun::~LocalRun() { kill_agents(); }

Status LocalRun::start() {
  started_ns_ = mono_ns();
  controller_ = std::make_unique<mesh::Controller>(
      loop_.get(), ctx_, mesh::ControllerOptions{opts_.job, opts_.steps, opts_.run_dir});
  controller_->on_stop_requested = [this](const std::string& why) {
    begin_stop(why, controller_->training().failure().empty() ? 0 : 1);
  };
  controller_->on_change = [this] { refresh(false); };
  SAL_TRY(controller_->start());
  FILE* out = opts_.json ? stderr : stdout;
  std::fprintf(out, "repl  %s\nmesh  %s\nlogs  %s\n", controller_->repl_endpoint().c_str(),
               controller_->mesh_endpoint().c_str(), opts_.run_dir.c_str());
  std::fflush(out);
  loop_.on_signals([this](int sig) { on_signal(sig); });
  for (size_t i = 0; i < size_t(opts_.job.mesh.nodes); ++i) spawn_agent(i);
  progress_timer_.start(100, 100, [this] { refresh(false); });
  return {};
}

void LocalRun::spawn_agent(size_t i) {
  auto exe = self_exe();
  auto proc = std::make_unique<mesh::ChildProcess>(
      loop_.get(), [this, i](int64_t code, int sig) { on_agent_exit(i, code, sig); });
  mesh::SpawnOptions so;
  so.exe = exe.ok() ? *exe : "salamander";
  so.args = {"agent", "--controller", controller_->mesh_endpoint(), "--devices", opts_.job.mesh.devices,
             "--name", "node" + std::to_string(i), "--parent-pid", std::to_string(getpid()),
             "--log-level", opts_.log_level, "--log-format", opts_.log_format};
  so.log_file = opts_.run_dir + "/agent-" + std::to_string(i) + ".log";
  if (auto s = proc->spawn(so); !s) {
    spdlog::error("agent {}: {}", i, s.error().message());
  }
  if (agents_.size() <= i) agents_.resize(i + 1);
  agents_[i] = std::move(proc);
}

void LocalRun::on_agent_exit(size_t i, int64_t code, int sig) {
  if (stopping_) {
    spdlog::info("agent {} exited (code {}, signal {})", i, code, sig);
  } else {
    spdlog::warn("agent {} exited unexpectedly (code {}, signal {})", i, code, sig);
  }
  if (stopping_) return wait_for_agents();
  bool any_running = false;
  for (auto& a : agents_) any_running |= a && a->running();
  if (!any_running) begin_stop("every node is gone", 1);
}

void LocalRun::on_signal(int sig) {
  if (stopping_) {
    progress_.finish();
    std::fprintf(stderr, "second interrupt: killing the local mesh now\n");
    kill_agents();
    exit_code_ = 130;
    loop_.stop();
    return;
  }
  begin_stop(sig == SIGINT ? "interrupted (Ctrl-C)" : "terminated", sig == SIGINT ? 130 : 143);
}

void LocalRun::begin_stop(const std::string& why, int code) {
  if (stopping_) return;
  stopping_ = true;
  stop_reason_ = why;
  exit_code_ = code;
  finished_ns_ = mono_ns();
  refresh(true);
  controller_->shutdown(why, [this] { wait_for_agents(); });
  reap_timer_.start(kAgentExitGraceMs + 3000, 0, [this] {
    spdlog::warn("agents still running {} ms after the stop; killing them", kAgentExitGraceMs + 3000);
    kill_agents();
    loop_.stop();
  });
}

void LocalRun::wait_for_agents() {
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

std::string LocalRun::status_line() const {
  const auto& m = controller_->membership();
  const auto& st = controller_->steps();
  const auto& tr = controller_->training();
  double t = double((finished_ns_ ? finished_ns_ : mono_ns()) - started_ns_) / 1e9;
  std::string steps = opts_.steps > 0 ? std::to_string(st.committed()) + "/" + std::to_string(opts_.steps)
                                      : "idle (no steps)";
  std::string train;
  if (tr.metrics().last()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " · loss %.3f · %.0f tok/s", tr.metrics().mean_loss(10),
                  tr.metrics().recent_tokens_per_s(20));
    train = buf;
  }
  std::string plan = tr.applied() ? " · plan " + std::to_string(tr.applied()->number) : "";
  char buf[320];
  std::snprintf(buf, sizeof buf, "[%6.1fs] step %s%s · %zu workers · %s%s · epoch %llu · nodes %zu/%lld alive", t,
                steps.c_str(), train.c_str(), m.ready_workers(), mesh::Training::phase_name(tr.phase()), plan.c_str(),
                (unsigned long long)m.epoch(), m.count(mesh::NodeState::alive) + m.count(mesh::NodeState::suspect),
                (long long)opts_.job.mesh.nodes);
  return buf;
}

void LocalRun::refresh(bool force) {
  if (!controller_) return;
  progress_.update(status_line(), force);
}

void LocalRun::print_summary() {
  progress_.finish();
  const auto& m = controller_->membership();
  const auto& st = controller_->steps();
  const auto& tr = controller_->training();
  const auto& metrics = tr.metrics();
  double elapsed = double((finished_ns_ ? finished_ns_ : mono_ns()) - started_ns_) / 1e9;
  size_t joined = m.nodes().size(), lost = m.count(mesh::NodeState::dead);
  if (opts_.json) {
    nlohmann::ordered_json j;
    j["job"] = opts_.job.name;
    j["steps"] = st.committed();
    j["steps_target"] = opts_.steps;
    j["aborted_steps"] = st.aborted();
    j["first_loss"] = metrics.first() ? nlohmann::json(metrics.first()->loss) : nlohmann::json();
    j["final_loss"] = metrics.last() ? nlohmann::json(metrics.last()->loss) : nlohmann::json();
    j["tokens_per_s"] = metrics.tokens_per_s();
    j["plan"] = tr.applied() ? tr.applied()->number : 0;
    j["epoch"] = m.epoch();
    j["nodes_joined"] = joined;
    j["nodes_lost"] = lost;
    j["elapsed_s"] = elapsed;
    j["stopped_by"] = stop_reason_;
    if (!tr.failure().empty()) j["failure"] = tr.failure();
    if (!tr.checkpoint_dir().empty() && tr.phase() == mesh::Training::Phase::done) j["checkpoint"] = tr.checkpoint_dir();
    j["run_dir"] = opts_.run_dir;
    j["exit_code"] = exit_code_;
    std::puts(j.dump().c_str());
  } else {
    std::printf("%s — %llu steps committed (%llu aborted) in %.2f s · epoch %llu · %zu nodes joined, %zu lost\n",
                stop_reason_.c_str(), (unsigned long long)st.committed(), (unsigned long long)st.aborted(), elapsed,
                (unsigned long long)m.epoch(), joined, lost);
    if (metrics.first())
      std::printf("loss %.3f -> %.3f · %.0f tokens/s\n", metrics.first()->loss, metrics.last()->loss,
                  metrics.tokens_per_s());
    if (!tr.failure().empty()) std::printf("training failed: %s\n", tr.failure().c_str());
    if (!tr.checkpoint_dir().empty() && tr.phase() == mesh::Training::Phase::done)
      std::printf("checkpoint in %s (try: salamander sample --checkpoint %s)\n", tr.checkpoint_dir().c_str(),
                  tr.checkpoint_dir().c_str());
    std::printf("logs, events.csv and metrics.csv in %s\n", opts_.run_dir.c_str());
  }
  std::fflush(stdout);
}

}  // namespace sal::cli
