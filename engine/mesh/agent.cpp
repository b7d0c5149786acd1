// agent.cpp — see agent.h.
#include "mesh/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "comm/shm_sweep.h"
#include "core/clock.h"
#include "core/paths.h"
#include "mesh/endpoint.h"
#include "mesh/membership.h"
#include "mesh/security.h"
#include "mesh/zmq_uv.h"
#include "wire/fence.h"

namespace sal::mesh {

// While unregistered, the registration is repeated this often (the controller may not be up yet;
// a repeat on the same connection is idempotent).
constexpr uint64_t kRegisterRetryMs = 1000;
// Grace period for workers to stop after being told to, before SIGKILL.
constexpr uint64_t kWorkerStopGraceMs = 2000;
// A goodbye must leave before the socket closes.
constexpr int kGoodbyeLingerMs = 500;
// How often the controller's silence is judged (check_silence).
constexpr int64_t kSilenceCheckMs = 200;
// A crashed worker's device gets a new worker after this pause, doubled at each restart of that
// device (a crash that repeats at once does not restart in a tight loop).
constexpr int64_t kFirstRestartDelayMs = 500;
// A worker that ran this long after it was ready crashed on its own, not in a loop: its device's
// restarts (and their pause) count from zero again.
constexpr int64_t kStableRunMs = 10 * 60 * 1000;

namespace {

std::string random_tag() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// The time since the last of a periodic check's runs (`last`, 0 before the first), which is now:
// a gap much longer than the check's period means this agent's loop did not run in between.
int64_t gap_since(int64_t& last, int64_t now) {
  const int64_t gap = last ? now - last : 0;
  last = now;
  return gap;
}

}  // namespace

Agent::Agent(uv_loop_t* loop, zmq::context_t& ctx, AgentOptions opts)
    : loop_(loop),
      ctx_(ctx),
      opts_(std::move(opts)),
      ctrl_(ctx, zmq::socket_type::dealer),
      local_(ctx, zmq::socket_type::router),
      heartbeat_timer_(loop),
      register_timer_(loop),
      silence_timer_(loop),
      kill_timer_(loop) {
  if (opts_.name.empty()) opts_.name = hostname() + ":" + std::to_string(getpid());
}

Agent::~Agent() {
  ctrl_watcher_.reset();
  local_watcher_.reset();
  if (shares_)
    for (const auto& w : workers_) (void)shares_->release(CpuShares::worker_group(getpid(), w.index));
}

// --cpu-share: the workers' cgroups, or a warning and unconfined workers where there are none.
void Agent::open_cpu_shares() {
  if (opts_.cpu_share <= 0) return;
  auto shares = CpuShares::open(opts_.cpu_share);
  if (!shares) {
    spdlog::warn("--cpu-share {}: {}; the workers run unconfined", opts_.cpu_share, shares.error().message());
    return;
  }
  if (int n = shares->prune_dead()) spdlog::info("removed {} CPU cgroups left by agents that died", n);
  spdlog::info("workers confined to {} CPU each (CFS quota {} us per {} us, cgroups in {})", shares->share(),
               shares->quota_us(), shares->period_us(), shares->path());
  shares_ = std::move(*shares);
}

Status Agent::start() {
  if (opts_.devices.empty()) return fail("agent: no devices");
  if (opts_.data_host.empty()) opts_.data_host = is_local_endpoint(opts_.controller) ? "127.0.0.1" : hostname();
  open_cpu_shares();
  comm::sweep_ucx_segments_logged();  // what workers killed on this host left in /dev/shm
  apply_control_options(ctrl_);
  ctrl_.set(zmq::sockopt::linger, kGoodbyeLingerMs);
  ctrl_.set(zmq::sockopt::routing_id, "agent-" + hostname() + "-" + std::to_string(getpid()) + "-" + random_tag());
  if (!opts_.server_public_key.empty()) {
    auto own = load_key_file(opts_.key_file);
    if (!own) return Error("--key: " + own.error().message());
    if (own->secret_key.empty()) return fail("--key: ", opts_.key_file, " holds no secret-key");
    make_curve_client(ctrl_, opts_.server_public_key, *own);
  } else if (!is_local_endpoint(opts_.controller)) {
    return fail("controller ", opts_.controller,
                " is not local: CURVE is required (--server-key PUBLIC and --key FILE)");
  }
  try {
    ctrl_.connect(opts_.controller);
  } catch (const zmq::error_t& e) {
    return fail("cannot connect to controller ", opts_.controller, ": ", e.what());
  }
  apply_control_options(local_);
  auto ep = bind_endpoint(local_, "ipc://@salamander-agent-" + std::to_string(getpid()) + "-" + random_tag());
  if (!ep) return Error("agent worker endpoint: " + ep.error().message());
  local_endpoint_ = *ep;
  auto slices = SliceServer::open(loop_, opts_.data_host, opts_.key_file);
  if (!slices) return slices.error().with_context("agent");
  slices_ = std::move(*slices);
  slices_->on_report = [this](const wire::SliceReport& r) {
    if (node_id_ != kNoNode) to_controller(r);
  };
  ctrl_watcher_ = std::make_unique<ZmqWatcher>(loop_, ctrl_, [this] { on_controller_message(); });
  local_watcher_ = std::make_unique<ZmqWatcher>(loop_, local_, [this] { on_worker_message(); });
  last_contact_ns_ = mono_ns();
  send_register();
  register_timer_.start(kRegisterRetryMs, kRegisterRetryMs, [this] {
    if (phase_ == Phase::registering) send_register();
  });
  silence_timer_.start(kSilenceCheckMs, kSilenceCheckMs, [this] { check_silence(); });
  spdlog::info("agent {} connecting to {} with {} device(s)", opts_.name, opts_.controller, opts_.devices.size());
  return {};
}

template <class M>
void Agent::to_controller(const M& msg) {
  try {
    (void)zmq::send_multipart(ctrl_, wire::encode(msg), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    spdlog::warn("send to controller failed: {}", e.what());
  }
}

template <class M>
void Agent::to_worker(const Worker& w, const M& msg) {
  if (w.rid.empty() || w.exited) return;
  if (auto why = send_routed(local_, w.rid, msg); !why.empty())
    spdlog::debug("send to worker {} failed: {}", w.index, why);
}

void Agent::send_register() {
  to_controller(wire::RegisterNode{opts_.name, hostname(), uint32_t(getpid()), opts_.devices,
                                   "salamander " SAL_VERSION, previous_id_, slices_->endpoint(), slices_->public_key()});
}

void Agent::send_heartbeat() {
  if (node_id_ == kNoNode || phase_ == Phase::registering) return;
  wire::Heartbeat hb{node_id_, ++hb_seq_, {}};
  for (const auto& w : workers_)
    if (!w.exited) hb.workers.push_back({w.index, w.device, uint32_t(w.proc ? w.proc->pid() : 0), w.state, w.held});
  to_controller(hb);
}

void Agent::on_controller_message() {
  wire::Parts parts;
  if (!recv_now(ctrl_, parts)) return;
  last_contact_ns_ = mono_ns();
  if (fenced_) {
    fenced_ = false;
    spdlog::info("the controller is heard again");
  }
  auto env = wire::open(parts);
  if (!env) {
    spdlog::warn("bad message from controller: {}", env.error().message());
    return;
  }
  using T = wire::MsgType;
  switch (env->type) {
    case T::welcome:
      if (auto m = wire::decode<wire::Welcome>(*env)) handle_welcome(*m);
      break;
    case T::ping:
      break;  // contact noted above
    case T::command:
      if (auto m = wire::decode<wire::Command>(*env)) handle_command(*m);
      break;
    case T::step_begin:
      if (auto m = wire::decode<wire::StepBegin>(*env))
        for (auto& w : workers_)
          if (w.state == wire::WorkerState::ready) to_worker(w, *m);
      break;
    case T::step_commit:
      if (auto m = wire::decode<wire::StepCommit>(*env))
        for (auto& w : workers_) to_worker(w, *m);
      break;
    case T::step_abort:
      if (auto m = wire::decode<wire::StepAbort>(*env))
        for (auto& w : workers_) to_worker(w, *m);
      break;
    case T::step_patch:
      if (auto m = wire::decode<wire::StepPatch>(*env))
        for (auto& w : workers_) to_worker(w, *m);
      break;
    case T::job_spec:
      if (auto m = wire::decode<wire::JobSpec>(*env)) {
        if (auto key = ckpt::parse_slice_mac_key(m->slice_mac_key)) slices_->set_mac_key(*key);
        else spdlog::warn("the job's slice key: {}", key.error().message());
        job_ = std::move(*m);
        for (auto& w : workers_) to_worker(w, *job_);
      }
      break;
    case T::plan_update:
      if (auto m = wire::decode<wire::PlanUpdate>(*env)) relay_plan(*m);
      break;
    case T::save_checkpoint:
      if (auto m = wire::decode<wire::SaveCheckpoint>(*env))
        for (auto& w : workers_) to_worker(w, *m);
      break;
    case T::fault_arm:
      if (auto m = wire::decode<wire::FaultArm>(*env))
        for (auto& w : workers_)
          if (w.index == m->index) to_worker(w, *m);
      break;
    case T::error:
      if (auto m = wire::decode<wire::ErrorReply>(*env)) {
        // One registration answers every message the restarted controller refused (those queued
        // while it was away come back as a burst of refusals).
        if (m->code == uint16_t(wire::ErrorCode::unknown_node) && phase_ == Phase::registering) {
          break;
        } else if (m->code == uint16_t(wire::ErrorCode::unknown_node) && phase_ != Phase::stopping) {
          spdlog::warn("controller no longer knows us ({}); registering again", m->message);
          phase_ = Phase::registering;
          if (node_id_ != kNoNode) previous_id_ = node_id_;
          node_id_ = kNoNode;
          send_register();
        } else {
          spdlog::warn("controller error {}: {}", m->code, m->message);
        }
      }
      break;
    default:
      spdlog::warn("unexpected {} from controller", wire::type_name(env->type));
  }
}

void Agent::handle_welcome(const wire::Welcome& w) {
  bool first = node_id_ == kNoNode && workers_.empty();
  node_id_ = w.node_id;
  heartbeat_ms_ = std::max<uint32_t>(w.heartbeat_ms, 10);
  restart_limit_ = w.worker_restarts;
  miss_limit_ = std::max<uint32_t>(w.miss_limit, 1);
  if (w.grace_ms > 0) opts_.controller_timeout_ms = int64_t(w.grace_ms);
  if (phase_ == Phase::registering) phase_ = Phase::running;
  slices_->set_node(node_id_);
  slices_->set_allowlist(Allowlist::of_nodes(w.node_keys));
  to_controller(slices_->report());  // what it holds (a restarted controller learns it again)
  spdlog::info("registered as node {} of job '{}' (epoch {}, heartbeat {} ms)", w.node_id, w.job,
               w.epoch, heartbeat_ms_);
  heartbeat_timer_.start(0, heartbeat_ms_, [this] {
    send_heartbeat();
    check_workers();
    restart_due();
  });
  if (first) {
    spawn_workers();
  } else {
    for (const auto& wk : workers_)
      if (wk.state == wire::WorkerState::ready && !wk.exited) report(wk, wire::WorkerEventKind::ready);
  }
}

void Agent::handle_command(const wire::Command& c) {
  switch (c.verb) {
    case wire::Verb::kill:
      spdlog::warn("killed by the controller: {}", c.reason);
      spdlog::default_logger()->flush();
      ::kill(getpid(), SIGKILL);  // workers follow through PR_SET_PDEATHSIG
      break;
    case wire::Verb::drain:
      if (phase_ == Phase::running) {
        phase_ = Phase::draining;
        stop_reason_ = "drained: " + c.reason;
        spdlog::info("draining: {}", c.reason);
        stop_workers(wire::Verb::drain, c.reason);
      }
      break;
    case wire::Verb::stop:
      if (phase_ != Phase::stopping && phase_ != Phase::done) {
        phase_ = Phase::stopping;
        stop_reason_ = "stopped: " + c.reason;
        spdlog::info("stopping: {}", c.reason);
        stop_workers(wire::Verb::stop, c.reason);
      }
      break;
    default:
      break;
  }
}

void Agent::stop(const std::string& reason) { handle_command(wire::Command{wire::Verb::stop, reason}); }

void Agent::spawn_workers() {
  restarts_done_.assign(opts_.devices.size(), 0);
  for (size_t i = 0; i < opts_.devices.size(); ++i) {
    workers_.emplace_back();
    Worker& w = workers_.back();
    w.index = w.slot = uint32_t(i);
    w.device = opts_.devices[i];
  }
  for (auto& w : workers_) {
    start_worker(w);
    if (!w.exited) report(w, wire::WorkerEventKind::started);
  }
}

void Agent::start_worker(Worker& w) {
  w.proc = std::make_unique<ChildProcess>(loop_, [this, &w](int64_t code, int sig) { on_worker_exit(w, code, sig); });
  SpawnOptions so;
  so.exe = self_spawn_exe();
  so.args = {"worker", "--agent", local_endpoint_, "--index", std::to_string(w.index), "--device", w.device,
             "--parent-pid", std::to_string(getpid()), "--node", std::to_string(node_id_),
             "--heartbeat-ms", std::to_string(heartbeat_ms_), "--log-level", opts_.log_level,
             "--log-format", opts_.log_format, "--data-host", opts_.data_host};
  if (!opts_.server_public_key.empty())  // CURVE towards the rendezvous store, with our key
    so.args.insert(so.args.end(), {"--server-key", opts_.server_public_key, "--key", absolute_path(opts_.key_file)});
  if (auto s = w.proc->spawn(so); !s) {
    w.exited = true;
    w.last_error = s.error().message();
    spdlog::error("worker {}: {}", w.index, w.last_error);
    report(w, wire::WorkerEventKind::spawn_failed, 0, 0, w.last_error);
    return;
  }
  spdlog::info("worker {} on {} started (pid {})", w.index, w.device, w.proc->pid());
  if (shares_)
    if (auto s = shares_->confine(w.proc->pid(), CpuShares::worker_group(getpid(), w.index)); !s)
      spdlog::warn("worker {} runs unconfined: {}", w.index, s.error().message());
}

void Agent::schedule_restart(const Worker& w, const std::string& how) {
  if (mono_ns() - w.ready_ns >= kStableRunMs * 1'000'000) restarts_done_[w.slot] = 0;
  uint32_t done = restarts_done_[w.slot];
  if (done >= restart_limit_) {
    if (restart_limit_ > 0)
      spdlog::warn("worker {} on {} is not started again: its device had {} restarts in a row (mesh.worker_restarts)", w.index,
                   w.device, done);
    return;
  }
  int64_t delay_ms = kFirstRestartDelayMs << std::min<uint32_t>(done, 20);
  restarts_done_[w.slot] = done + 1;
  restarts_due_.push_back({w.slot, w.index, mono_ns() + delay_ms * 1'000'000, how});
  spdlog::info("worker {} on {} is started again in {} ms (restart {} of {})", w.index, w.device, delay_ms, done + 1,
               restart_limit_);
}

// Checked at every heartbeat: each restart whose pause is over gets its new worker, with the next
// free index of its device slot (core/devices.h: device_slot; while the agent registers again, they
// wait; once it stops, none).
void Agent::restart_due() {
  if (phase_ == Phase::registering) return;
  if (phase_ != Phase::running) return restarts_due_.clear();
  const int64_t now = mono_ns();
  const uint32_t n = uint32_t(opts_.devices.size());
  for (size_t i = 0; i < restarts_due_.size();) {
    Restart r = restarts_due_[i];
    if (r.due_ns > now) {
      ++i;
      continue;
    }
    restarts_due_.erase(restarts_due_.begin() + ptrdiff_t(i));
    uint32_t index = r.slot;
    for (const auto& w : workers_)
      if (w.slot == r.slot) index = std::max(index, w.index + n);
    workers_.emplace_back();
    Worker& w = workers_.back();
    w.index = index;
    w.slot = r.slot;
    w.device = opts_.devices[r.slot];
    start_worker(w);
    if (w.exited) continue;
    report(w, wire::WorkerEventKind::restarted, 0, 0,
           "in place of worker " + std::to_string(node_id_) + "." + std::to_string(r.replaces) + " (" + r.why +
               "); restart " + std::to_string(restarts_done_[r.slot]) + " of " + std::to_string(restart_limit_));
  }
}

void Agent::report(const Worker& w, wire::WorkerEventKind kind, int code, int sig, const std::string& detail) {
  if (node_id_ == kNoNode) return;
  to_controller(wire::WorkerEvent{node_id_, w.index, kind, uint32_t(w.proc ? w.proc->pid() : 0), code, sig, detail});
}

// Our worker socket is an abstract unix socket that any process of this host could reach: a hello
// counts only from the worker process it names (its pid, by SO_PEERCRED), and every later message
// only from the connection that said it.
void Agent::on_worker_message() {
  wire::Parts parts;
  if (!recv_now(local_, parts) || parts.empty()) return;
  std::string rid = parts[0].to_string();
  int fd = parts.size() > 1 ? source_fd(parts[1]) : -1;
  parts.erase(parts.begin());
  auto env = wire::open(parts);
  if (!env) return refuse_local(wire::error_code_name(env.error().code()), env.error().message());
  Worker* w = nullptr;
  for (auto& x : workers_)
    if (x.rid == rid) w = &x;
  if (w) w->last_seen_ns = mono_ns();
  using T = wire::MsgType;
  if (env->type == T::worker_hello) {
    auto m = wire::decode<wire::WorkerHello>(*env);
    if (!m) return refuse_local("malformed", m.error().message());
    auto it = std::find_if(workers_.begin(), workers_.end(), [&](const Worker& x) { return x.index == m->index; });
    if (it == workers_.end()) return refuse_local("bad index", "WorkerHello for worker " + std::to_string(m->index));
    Worker& named = *it;
    pid_t pid = peer_pid(fd);
    if (!named.proc || named.exited || pid != named.proc->pid())
      return refuse_local("impostor", "WorkerHello for worker " + std::to_string(m->index) + " from pid " +
                                          std::to_string(pid) + ", which is not that worker");
    named.rid = rid;
    named.last_seen_ns = mono_ns();
    if (job_) to_worker(named, *job_);
    // A worker relaunched for a plan (runtime/relaunch.h) missed what came while it started again:
    // a newer plan is sent again (an abandoned one's rendezvous fails at once).
    if (m->pending_plan != 0 && named.last_plan && named.last_plan->number() > m->pending_plan)
      to_worker(named, *named.last_plan);
    return;
  }
  if (!w) return refuse_local("unknown sender", std::string(wire::type_name(env->type)) + " from a connection that said no hello");
  if (!w) return;
  if (env->type == T::worker_status) {
    auto m = wire::decode<wire::WorkerStatus>(*env);
    if (!m) return;
    w->held = m->held;
    if (m->state == w->state) return;
    w->state = m->state;
    if (m->state == wire::WorkerState::ready) {
      if (!w->was_ready) w->ready_ns = mono_ns();
      w->was_ready = true;
      report(*w, wire::WorkerEventKind::ready);
    }
    send_heartbeat();  // tell the controller about the state change now
  } else if (env->type == T::step_vote) {
    relay_up<wire::StepVote>(*env, *w);
  } else if (env->type == T::plan_ready) {
    relay_up<wire::PlanReady>(*env, *w);
  } else if (env->type == T::save_done) {
    relay_up<wire::SaveDone>(*env, *w);
  } else if (env->type == T::error) {
    if (auto m = wire::decode<wire::ErrorReply>(*env)) w->last_error = m->message;
  }
}

void Agent::refuse_local(const char* kind, const std::string& why) {
  uint64_t suppressed = 0;
  if (bad_local_log_.allow(kind, mono_ns(), suppressed))
    spdlog::warn("worker endpoint: dropped a message: {}{}", why, KindLog::more(suppressed));
}

// A worker's answer goes to the controller under our node id and the worker's index.
template <class M>
void Agent::relay_up(const wire::Envelope& env, const Worker& w) {
  auto m = wire::decode<M>(env);
  if (!m) {
    spdlog::warn("bad {} from worker {}: {}", wire::type_name(env.type), w.index, m.error().message());
    return;
  }
  m->node_id = node_id_;
  m->index = w.index;
  to_controller(*m);
}

// Each of our workers that the plan names gets it with its own rank.
void Agent::relay_plan(wire::PlanUpdate plan) {
  slices_->set_budget(plan.slice_budget);
  for (auto& w : workers_) {
    auto it = std::find_if(plan.ranks.begin(), plan.ranks.end(),
                           [&](const wire::RankRef& r) { return r.node == node_id_ && r.index == w.index; });
    if (it == plan.ranks.end()) continue;
    plan.my_rank = int32_t(it - plan.ranks.begin());
    w.last_plan = plan;
    to_worker(w, plan);
  }
}

void Agent::on_worker_exit(Worker& w, int64_t code, int sig) {
  w.exited = true;
  w.state = wire::WorkerState::stopped;
  bool expected = phase_ == Phase::draining || phase_ == Phase::stopping;
  if (expected) {
    spdlog::info("worker {} exited (code {}, signal {})", w.index, code, sig);
  } else {
    spdlog::warn("worker {} exited unexpectedly (code {}, signal {}){}", w.index, code, sig,
                 w.last_error.empty() ? "" : ": " + w.last_error);
  }
  report(w, wire::WorkerEventKind::exited, int(code), sig, w.last_error);
  if (sig != 0) comm::sweep_ucx_segments_logged();
  if (shares_)
    if (auto s = shares_->release(CpuShares::worker_group(getpid(), w.index)); !s)
      spdlog::warn("worker {}: {}", w.index, s.error().message());
  // One that never got ready failed to start (its device, its job): starting it again would fail
  // the same way, and the job says why it cannot start instead.
  if (!expected && phase_ == Phase::running && w.was_ready)
    schedule_restart(w, !w.last_error.empty() ? w.last_error
                        : sig != 0            ? "killed by signal " + std::to_string(sig)
                                              : "exited with code " + std::to_string(code));
  maybe_finish();
}

void Agent::stop_workers(wire::Verb verb, const std::string& reason) {
  for (auto& w : workers_) to_worker(w, wire::Command{verb, reason});
  kill_timer_.start(kWorkerStopGraceMs, 0, [this] {
    for (auto& w : workers_)
      if (!w.exited && w.proc && w.proc->running()) {
        spdlog::warn("worker {} did not stop within {} ms; killing it", w.index, kWorkerStopGraceMs);
        w.proc->signal(SIGKILL);
      }
  });
  maybe_finish();
}

void Agent::maybe_finish() {
  if (phase_ != Phase::draining && phase_ != Phase::stopping) return;
  for (const auto& w : workers_)
    if (!w.exited) return;
  finish(exit_code_, stop_reason_);
}

void Agent::finish(int code, const std::string& reason) {
  if (phase_ == Phase::done) return;
  if (node_id_ != kNoNode) to_controller(wire::Goodbye{node_id_, reason});
  phase_ = Phase::done;
  heartbeat_timer_.stop();
  register_timer_.stop();
  silence_timer_.stop();
  kill_timer_.stop();
  spdlog::info("agent leaving: {}", reason);
  if (on_exit) on_exit(code);
}

// A worker that stops reporting (frozen, or hung outside its control loop) is as good as dead
// to the job: it is killed, and its exit is reported like any other, with the reason. One whose
// process the kernel still runs — its control thread waiting for a CPU or in the kernel (a page
// fault on a host short of memory), or any of its threads using CPU within the liveness window —
// is busy on a machine short of CPU, not dead: it gets more time (busy()); a stopped one
// (SIGSTOP) is found within the window as before. A worker
// still starting (loading its device: the GPU plugin and CUDA's libraries take a while on a busy
// machine) has kStartWindowMs before its silence counts, so that the reason it may give for not
// starting reaches the user rather than "unresponsive". When the agent itself was stopped (the
// whole node frozen, then resumed), its workers were too: their silence is not theirs, and they
// get a fresh window.
void Agent::check_workers() {
  if (phase_ != Phase::running) return;
  constexpr int64_t kStartWindowMs = 10000;
  int64_t limit_ns = int64_t(heartbeat_ms_) * miss_limit_ * 1'000'000;
  const int64_t start_limit_ns = std::max(limit_ns, kStartWindowMs * 1'000'000);
  const int64_t now = mono_ns(), gap = gap_since(last_check_ns_, now);
  if (gap >= limit_ns) {
    spdlog::warn("this agent did not run for {} ms (stopped?): its workers get a fresh liveness window",
                 gap / 1'000'000);
    for (auto& w : workers_)
      if (w.last_seen_ns != 0) w.last_seen_ns = now;
    return;
  }
  for (auto& w : workers_) {
    if (w.exited || w.last_seen_ns == 0 || !w.proc || !w.proc->running()) continue;
    const auto sample = look_at_cpu(w, now);
    int64_t silent = now - w.last_seen_ns;
    if (silent < (w.state == wire::WorkerState::starting ? start_limit_ns : limit_ns)) {
      w.said_busy = false;
      continue;
    }
    if (busy(w, sample, silent, limit_ns, now)) continue;
    w.last_error = "unresponsive: silent for " + std::to_string(silent / 1'000'000) + " ms";
    spdlog::warn("worker {} {}; killing it", w.index, w.last_error);
    w.proc->signal(SIGKILL);
    w.last_seen_ns = 0;
  }
}

// The worker's CPU time, at every look (a heartbeat), for busy_process (mesh/process.h): whether it
// grew within the liveness window, not merely since the last look. The sample is handed on to
// busy(), so a silent worker's /proc entry is read once a check.
Result<ProcessSample> Agent::look_at_cpu(Worker& w, int64_t now) {
  auto s = sample_process(w.proc->pid());
  if (s && s->cpu_ticks > w.cpu_ticks) {
    w.cpu_ticks = s->cpu_ticks;
    w.cpu_grew_ns = now;
  }
  return s;
}

bool Agent::busy(Worker& w, const Result<ProcessSample>& s, int64_t silent_ns, int64_t limit_ns, int64_t now) {
  constexpr int64_t kBusyWindows = 10;
  if (!s || silent_ns >= kBusyWindows * limit_ns) return false;
  const Busy b = busy_process(*s, w.cpu_grew_ns, now, limit_ns);
  if (b == Busy::no) return false;
  if (!w.said_busy)
    spdlog::warn("worker {} silent for {} ms but busy (its process is {}): it gets up to {} ms", w.index,
                 silent_ns / 1'000'000, busy_name(b), kBusyWindows * limit_ns / 1'000'000);
  w.said_busy = true;
  return true;
}

// Cut off from the controller for as long as the controller waits out a silence of every node
// before declaring them dead (membership.h: fence_after_ms, 1.6 s at 100 ms heartbeats and 3
// misses): the controller has declared this node dead by now (or has died), not merely stalled, so
// its workers stop the step in flight, the plan's data plane ends, and they step no more. A step
// already voted keeps its gradients (wire/fence.h): a controller restarted from its journal may
// commit it; one that declared the node dead aborted it and never will. When the controller is
// heard again the agent registers again and joins anew. Only after the grace
// period (mesh.controller_grace_ms) does it give up and stop its workers.
void Agent::check_silence() {
  if (phase_ == Phase::done) return;
  // What the controller sent while this agent was not running counts first: libuv runs timers
  // before it polls, so a starved agent waking up would judge silence with pings queued unread.
  if (ctrl_watcher_) ctrl_watcher_->drain();
  // A check a heartbeat late: this agent did not run in between (its host stalled, the controller's
  // too, most likely), and that time is not the controller's silence.
  const int64_t now = mono_ns(), gap = gap_since(last_silence_check_ns_, now);
  if (gap >= (kSilenceCheckMs + heartbeat_ms_) * 1'000'000) last_contact_ns_ = std::min(now, last_contact_ns_ + gap);
  int64_t silent_ms = (now - last_contact_ns_) / 1'000'000;
  if (!fenced_ && phase_ == Phase::running && silent_ms >= fence_after_ms(heartbeat_ms_, miss_limit_)) {
    fenced_ = true;
    spdlog::warn("no word from the controller for {} ms: the step in flight is abandoned until it is heard again",
                 silent_ms);
    for (auto& w : workers_) to_worker(w, wire::StepAbort{wire::kFenceEpoch, 0, "cut off from the controller"});
  }
  if (silent_ms < opts_.controller_timeout_ms) return;
  spdlog::error("no word from the controller at {} for {} ms; stopping", opts_.controller, silent_ms);
  phase_ = Phase::stopping;
  stop_reason_ = "controller silent";
  exit_code_ = 1;
  for (auto& w : workers_)
    if (w.proc && w.proc->running()) w.proc->signal(SIGTERM);
  stop_workers(wire::Verb::stop, "controller silent");
}

}  // namespace sal::mesh
