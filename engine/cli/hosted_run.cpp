// hosted_run.cpp — see hosted_run.h.
#include "cli/hosted_run.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/paths.h"

namespace sal::cli {

// After the controller has gone, agents get this long to exit before SIGKILL.
constexpr uint64_t kAgentsAfterControllerMs = 6000;

Result<std::string> fixed_endpoint(const std::string& bind) {
  const std::string any = ":*";
  if (bind.size() < any.size() || bind.compare(bind.size() - any.size(), any.size(), any) != 0) return bind;
  std::string host = bind.substr(0, bind.size() - any.size());
  std::string ip = host.rfind("tcp://", 0) == 0 ? host.substr(6) : host;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail("mesh.bind ", bind, ": ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  socklen_t len = sizeof a;
  bool ok = ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) == 1 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) return fail("mesh.bind ", bind, ": no free port to choose (", std::strerror(err), ")");
  return host + ":" + std::to_string(ntohs(a.sin_port));
}

HostedRun::HostedRun(EventLoop& loop, HostedRunOptions opts)
    : loop_(loop),
      opts_(std::move(opts)),
      listener_(loop.get(), [this](Result<HostRequest> r) { on_request(std::move(r)); }),
      restart_timer_(loop.get()),
      reap_timer_(loop.get()),
      orphan_timer_(loop.get()) {}

HostedRun::~HostedRun() {
  if (controller_) controller_->signal(SIGKILL);
  kill_agents();
  close_cpu_shares(shares_);
  if (link_write_ >= 0) ::close(link_write_);
}

Status HostedRun::start() {
  auto ep = fixed_endpoint(opts_.run.job.mesh.bind);
  if (!ep) return ep.error();
  endpoint_ = *ep;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail("the controller's link: ", std::strerror(errno));
  link_read_ = fds[0], link_write_ = fds[1];
  SAL_TRY(listener_.start(link_read_));
  shares_ = open_cpu_shares(opts_.run.cpu_share);
  FILE* out = opts_.run.json ? stderr : stdout;
  std::fprintf(out, "logs  %s\ncontroller  a child process (its drill kills it; it is restarted from the journal)\n",
               opts_.run.run_dir.c_str());
  std::fflush(out);
  SAL_TRY(spawn_controller(false));
  for (int64_t i = 0; i < opts_.run.job.mesh.nodes; ++i) spawn_agent();
  loop_.on_signals([this](int sig) { on_signal(sig); });
  return {};
}

Status HostedRun::spawn_controller(bool resume) {
  auto exe = self_exe();
  mesh::SpawnOptions so;
  so.exe = exe.ok() ? *exe : "salamander";
  const auto& r = opts_.run;
  so.args = {"controller"};
  if (resume) {
    so.args.insert(so.args.end(), {"--resume", r.run_dir});
  } else {
    so.args.insert(so.args.end(), opts_.controller_args.begin(), opts_.controller_args.end());
    so.args.insert(so.args.end(), {"--steps", std::to_string(r.steps), "--out", r.run_dir, "--mesh", endpoint_});
  }
  so.args.insert(so.args.end(), {"--host-fd", "3", "--parent-pid", std::to_string(getpid()), "--log-file",
                                 r.run_dir + "/controller.log", "--log-level", r.log_level, "--log-format", r.log_format});
  if (r.json) so.args.push_back("--json");
  so.pass_fd = link_write_;
  so.own_session = true;
  controller_ = std::make_unique<mesh::ChildProcess>(loop_.get(),
                                                     [this](int64_t code, int sig) { on_controller_exit(code, sig); });
  return controller_->spawn(so);
}

void HostedRun::spawn_agent() {
  size_t i = agents_.size();
  auto proc = std::make_unique<mesh::ChildProcess>(loop_.get(),
                                                   [this, i](int64_t code, int sig) { on_agent_exit(i, code, sig); });
  if (auto s = proc->spawn(local_agent(opts_.run, endpoint_, i, shares_.has_value())); !s)
    std::fprintf(stderr, "agent %zu: %s\n", i, s.error().message().c_str());
  agents_.push_back(std::move(proc));
}

void HostedRun::on_request(Result<HostRequest> r) {
  if (!r) return (void)std::fprintf(stderr, "salamander run: %s\n", r.error().message().c_str());
  if (finishing_) return;
  if (r->kind == HostRequest::Kind::add) {
    for (int64_t i = 0; i < r->value; ++i) spawn_agent();
    return;
  }
  if (!controller_ || !controller_->running()) return;
  restart_ms_ = r->value;
  controller_->signal(SIGKILL);
}

void HostedRun::on_controller_exit(int64_t code, int sig) {
  if (restart_ms_ && sig == SIGKILL && !finishing_) {
    std::fprintf(stderr, "\ncontroller killed by its drill; `salamander controller --resume %s` in %.1f s\n",
                 opts_.run.run_dir.c_str(), double(*restart_ms_) / 1e3);
    restart_timer_.start(uint64_t(*restart_ms_), 0, [this] {
      if (auto s = spawn_controller(true); !s) {
        std::fprintf(stderr, "salamander run: the controller could not be restarted: %s\n", s.error().message().c_str());
        finish(1);
      }
    });
    restart_ms_.reset();
    return;
  }
  if (sig) std::fprintf(stderr, "salamander run: the controller died (signal %d)\n", sig);
  finish(sig ? 1 : int(code));
  if (sig) kill_agents();  // nobody will tell them to stop
  maybe_done();
}

// Agents exit when the controller stops the job, or die in a drill: only when none is left and
// the controller has not ended the job on its own does the run stop it (it would wait for nodes).
void HostedRun::on_agent_exit(size_t, int64_t, int) {
  if (finishing_) return maybe_done();
  for (auto& a : agents_)
    if (a && a->running()) return;
  orphan_timer_.start(kAgentsAfterControllerMs, 0, [this] {
    for (auto& a : agents_)
      if (a && a->running()) return;
    if (finishing_ || !controller_ || !controller_->running()) return;
    std::fprintf(stderr, "salamander run: every agent is gone; stopping the controller\n");
    controller_->signal(SIGTERM);
  });
}

// Ctrl-C and SIGTERM go to the controller, which stops the job as `run` does (the first aborts the
// step and writes the checkpoint, a second skips it); with no controller up (a restart pending),
// the run stops here.
void HostedRun::on_signal(int sig) {
  interrupted_ = true;
  if (controller_ && controller_->running()) return controller_->signal(sig);
  restart_timer_.stop();
  std::fprintf(stderr, "interrupted while the controller was down: stopping the local mesh\n");
  finish(sig == SIGINT ? 130 : 143);
  kill_agents();
  maybe_done();
}

void HostedRun::finish(int code) {
  if (finishing_) return;
  finishing_ = true;
  exit_code_ = code;
  orphan_timer_.stop();
  reap_timer_.start(kAgentsAfterControllerMs, 0, [this] {
    std::fprintf(stderr, "agents still running %llu ms after the controller; killing them\n",
                 static_cast<unsigned long long>(kAgentsAfterControllerMs));
    kill_agents();
    loop_.stop();
  });
}

void HostedRun::maybe_done() {
  if (!finishing_ || (controller_ && controller_->running())) return;
  for (auto& a : agents_)
    if (a && a->running()) return;
  reap_timer_.stop();
  loop_.stop();
}

void HostedRun::kill_agents() {
  for (auto& a : agents_)
    if (a && a->running()) a->signal(SIGKILL);
}

}  // namespace sal::cli
