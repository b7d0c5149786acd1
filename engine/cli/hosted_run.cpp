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
#include <utility>

#include "comm/shm_sweep.h"
#include "core/clock.h"
#include "core/paths.h"
#include "core/strings.h"
#include "wire/curve.h"

namespace sal::cli {

// After the controller has gone, agents get this long to exit before SIGKILL.
constexpr uint64_t kAgentsAfterControllerMs = 6000;
// A controller that died of a signal comes back this much later, unless it died kMaxQuickDeaths
// times in a row within kQuickDeathMs of its start.
constexpr int64_t kCrashRestartMs = 500;
constexpr int64_t kQuickDeathMs = 5000;
constexpr int kMaxQuickDeaths = 3;

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

namespace {

// The port of a bind ("tcp://host:port"), or `fallback` for "*".
std::string bind_port(const std::string& bind, const std::string& fallback) {
  std::string port = bind.substr(bind.rfind(':') + 1);
  return port == "*" ? fallback : port;
}

// The command, run inside the lab's namespace of node `k` (-1: the hub's).
void in_namespace(const drill::NetLab& lab, int k, mesh::SpawnOptions& so) {
  std::vector<std::string> argv{so.exe};
  argv.insert(argv.end(), so.args.begin(), so.args.end());
  argv = lab.inside(k, argv);
  so.exe = argv[0];
  so.args.assign(argv.begin() + 1, argv.end());
}

}  // namespace

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
  comm::sweep_ucx_segments_logged();
  if (link_write_ >= 0) ::close(link_write_);
}

// The namespaces, and CURVE keys for a mesh that is no longer on loopback: the controller's pair, a
// pair the agents share, and an allowlist naming the agents' key as nodes.
Status HostedRun::build_lab() {
  auto lab = drill::NetLab::create(int(opts_.run.job.mesh.nodes));
  if (!lab) return lab.error().with_context("a drill that cuts links (partition{}) needs its mesh in network namespaces");
  lab_ = std::move(*lab);
  std::string keys = opts_.run.run_dir + "/keys";
  SAL_TRY(make_dirs(keys));
  auto server = wire::generate_key_files(keys + "/controller");
  if (!server) return server.error().with_context("the lab's keys");
  auto node = wire::generate_key_files(keys + "/node");
  if (!node) return node.error().with_context("the lab's keys");
  std::FILE* f = std::fopen((keys + "/allow").c_str(), "w");
  if (!f || std::fprintf(f, "%s node agents\n", node->public_key.c_str()) < 0 || std::fclose(f) != 0)
    return fail("the lab's keys: cannot write ", keys, "/allow");
  secure_args_ = {"--server-key", keys + "/controller.key", "--allow", keys + "/allow"};
  agent_keys_ = {"--server-key", keys + "/controller.pub", "--key", keys + "/node.key"};
  endpoint_ = "tcp://" + lab_->controller_address() + ":" + bind_port(opts_.run.job.mesh.bind, "7100");
  std::fprintf(opts_.run.json ? stderr : stdout,
               "netns  the mesh in network namespaces: the controller in %s, node K in %s…; reach the REPL with "
               "`ip netns exec %s salamander repl ENDPOINT`\n",
               lab_->hub_netns().c_str(), lab_->netns(0).c_str(), lab_->hub_netns().c_str());
  return {};
}

Status HostedRun::start() {
  if (opts_.netns) {
    SAL_TRY(build_lab());
  } else {
    auto ep = fixed_endpoint(opts_.run.job.mesh.bind);
    if (!ep) return ep.error();
    endpoint_ = *ep;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail("the controller's link: ", std::strerror(errno));
  link_read_ = fds[0], link_write_ = fds[1];
  SAL_TRY(listener_.start(link_read_));
  shares_ = open_cpu_shares(opts_.run.cpu_share);
  FILE* out = opts_.run.json ? stderr : stdout;
  std::fprintf(out, "logs  %s\ncontroller  a child process of this run: if it dies, it comes back from the journal\n",
               opts_.run.run_dir.c_str());
  std::fflush(out);
  SAL_TRY(spawn_controller(false));
  for (int64_t i = 0; i < opts_.run.job.mesh.nodes; ++i) spawn_agent();
  loop_.on_signals([this](int sig) { on_signal(sig); });
  return {};
}

Status HostedRun::spawn_controller(bool resume) {
  mesh::SpawnOptions so;
  so.exe = self_spawn_exe();
  const auto& r = opts_.run;
  so.args = {"controller"};
  if (resume) {
    so.args.insert(so.args.end(), {"--resume", r.run_dir});
    // the endpoints this command line gave stay where they were: a scraper or an operator reaches
    // the resumed controller where it reached the first
    const auto& c = opts_.controller_args;
    for (size_t i = 0; i + 1 < c.size(); ++i)
      if (c[i] == "--metrics" || c[i] == "--repl") so.args.insert(so.args.end(), {c[i], c[i + 1]});
  } else {
    so.args.insert(so.args.end(), opts_.controller_args.begin(), opts_.controller_args.end());
    so.args.insert(so.args.end(), {"--steps", std::to_string(r.steps), "--out", r.run_dir, "--mesh", endpoint_});
  }
  so.args.insert(so.args.end(), {"--host-fd", "3", "--parent-pid", std::to_string(getpid()), "--log-file",
                                 r.run_dir + "/controller.log", "--log-level", r.log_level, "--log-format", r.log_format});
  if (r.json) so.args.push_back("--json");
  if (lab_) {
    so.args.push_back("--host-netns");
    so.args.insert(so.args.end(), secure_args_.begin(), secure_args_.end());
    in_namespace(*lab_, -1, so);
  }
  so.pass_fd = link_write_;
  so.own_session = true;
  controller_ = std::make_unique<mesh::ChildProcess>(loop_.get(),
                                                     [this](int64_t code, int sig) { on_controller_exit(code, sig); });
  SAL_TRY(controller_->spawn(so));
  controller_started_ns_ = mono_ns();
  std::fprintf(opts_.run.json ? stderr : stdout, "controller  pid %d%s\n", int(controller_->pid()),
               resume ? ", resumed from the journal" : "");
  std::fflush(opts_.run.json ? stderr : stdout);
  return {};
}

void HostedRun::spawn_agent() {
  size_t i = agents_.size();
  auto proc = std::make_unique<mesh::ChildProcess>(loop_.get(),
                                                   [this, i](int64_t code, int sig) { on_agent_exit(i, code, sig); });
  auto so = local_agent(opts_.run, endpoint_, i, shares_.has_value());
  Status s;
  if (lab_) {
    if (int(i) >= lab_->nodes()) {
      auto added = lab_->add_node();
      if (!added) s = added.error();
    }
    so.args.insert(so.args.end(), {"--data-host", lab_->address(int(i))});
    so.args.insert(so.args.end(), agent_keys_.begin(), agent_keys_.end());
    in_namespace(*lab_, int(i), so);
  }
  if (s) s = proc->spawn(so);
  if (!s) std::fprintf(stderr, "agent %zu: %s\n", i, s.error().message().c_str());
  agents_.push_back(std::move(proc));
}

// partition{}: agent "nodeK" is in the lab's node K.
Status HostedRun::cut(const std::string& node, int64_t ms) {
  if (!lab_) return fail("cut ", node, ": this run's mesh is not in network namespaces");
  auto k = node.rfind("node", 0) == 0 ? parse_int(node.substr(4)) : Result<int64_t>(fail("not an agent of this run"));
  if (!k || *k < 0 || *k >= lab_->nodes()) return fail("cut ", node, ": not an agent of this run");
  int n = int(*k);
  SAL_TRY(lab_->cut(n));
  auto& timer = heals_[n];
  if (!timer) timer = std::make_unique<mesh::Timer>(loop_.get());
  timer->start(uint64_t(ms), 0, [this, n, node] {
    if (auto s = lab_->heal(n); !s) std::fprintf(stderr, "salamander run: heal %s: %s\n", node.c_str(), s.error().message().c_str());
  });
  return {};
}

void HostedRun::on_request(Result<HostRequest> r) {
  if (!r) return (void)std::fprintf(stderr, "salamander run: %s\n", r.error().message().c_str());
  if (finishing_) return;
  if (r->kind == HostRequest::Kind::add) {
    for (int64_t i = 0; i < r->value; ++i) spawn_agent();
    return;
  }
  if (r->kind == HostRequest::Kind::cut) {
    if (auto s = cut(r->node, r->value); !s) std::fprintf(stderr, "salamander run: %s\n", s.error().message().c_str());
    return;
  }
  if (!controller_ || !controller_->running()) return;
  restart_ms_ = r->value;
  controller_->signal(SIGKILL);
}

// A controller the drill asked to kill comes back after the drill's delay; one that died of a
// signal otherwise (a crash, an OOM kill, someone's kill -9) after kCrashRestartMs — unless it keeps
// dying right after its start. One that exited (the job's end, a stop, a failure) ends the run.
void HostedRun::on_controller_exit(int64_t code, int sig) {
  if (!finishing_ && restart_ms_ && sig == SIGKILL) {
    int64_t ms = *std::exchange(restart_ms_, std::nullopt);
    return restart_after(ms, "killed by its drill");
  }
  if (!finishing_ && sig && !interrupted_) {
    bool quick = mono_ns() - controller_started_ns_ < kQuickDeathMs * 1'000'000;
    quick_deaths_ = quick ? quick_deaths_ + 1 : 0;
    if (quick_deaths_ < kMaxQuickDeaths) return restart_after(kCrashRestartMs, "died (signal " + std::to_string(sig) + ")");
    std::fprintf(stderr, "salamander run: the controller died %d times within %d s of its start; giving up (see %s/controller.log)\n",
                 quick_deaths_, int(kQuickDeathMs / 1000), opts_.run.run_dir.c_str());
  } else if (sig) {
    std::fprintf(stderr, "salamander run: the controller died (signal %d)\n", sig);
  }
  finish(sig ? 1 : int(code));
  if (sig) kill_agents();  // nobody will tell them to stop
  maybe_done();
}

void HostedRun::restart_after(int64_t ms, const std::string& what) {
  std::fprintf(stderr, "\ncontroller %s; `salamander controller --resume %s` in %.1f s\n", what.c_str(),
               opts_.run.run_dir.c_str(), double(ms) / 1e3);
  restart_timer_.start(uint64_t(ms), 0, [this] {
    if (auto s = spawn_controller(true); !s) {
      std::fprintf(stderr, "salamander run: the controller could not be restarted: %s\n", s.error().message().c_str());
      finish(1);
      kill_agents();
      maybe_done();
    }
  });
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
