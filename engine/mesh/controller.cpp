// controller.cpp — see controller.h.
#include "mesh/controller.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "comm/store_server.h"
#include "core/clock.h"
#include "core/devices.h"
#include "core/paths.h"
#include "core/strings.h"
#include "job/planner_config.h"
#include "job/racks.h"
#include "mesh/endpoint.h"
#include "mesh/monitor.h"
#include "mesh/security.h"
#include "mesh/zmq_uv.h"

namespace sal::mesh {

// How often silent nodes are aged. A tenth of the default heartbeat keeps detection of a frozen
// node within ~10 ms of the miss_limit deadline.
constexpr int64_t kTickMs = 10;

namespace {

std::map<NodeId, std::string> known_nodes(const job::JournalState& j) {
  std::map<NodeId, std::string> out;
  for (const auto& [id, n] : j.nodes) out[id] = n.name;
  return out;
}

std::string hex_id(const std::string& rid) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : rid.substr(0, 8)) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace

Controller::Controller(uv_loop_t* loop, zmq::context_t& ctx, ControllerOptions opts)
    : loop_(loop),
      ctx_(ctx),
      opts_(std::move(opts)),
      membership_({opts_.job.mesh.heartbeat_ms, opts_.job.mesh.miss_limit, kTickMs}, events_),
      mesh_(ctx, zmq::socket_type::router),
      planner_(std::make_unique<policy::Planner>(job::planner_config(opts_.job), [this] { service(); })),
      tick_timer_(loop),
      ping_timer_(loop),
      stop_timer_(loop),
      started_ns_(mono_ns()) {
  for (size_t t = 0; t < size_t(job::Timer::count_); ++t) driver_timers_.push_back(std::make_unique<Timer>(loop_));
  if (auto racks = job::parse_racks(opts_.job.mesh.racks)) rack_of_name_ = std::move(*racks);  // (checked at load)
  if (opts_.resume && opts_.resume->job) {
    // the run's clock goes on from the first controller's start
    started_ns_ = mono_ns() - (wall_ms() - opts_.resume->job->started_wall_ms) * 1'000'000;
    membership_.resume(opts_.resume->epoch, known_nodes(*opts_.resume));
    if (opts_.resume->plan) planner_->resume(opts_.resume->plan->plan);
  }
  auto cfg = job::DriverConfig::from(opts_.job, opts_.max_steps, opts_.run_dir, started_ns_);
  cfg.resume_from = opts_.from_checkpoint;
  driver_ = opts_.resume ? std::make_unique<job::Driver>(cfg, *opts_.resume) : std::make_unique<job::Driver>(cfg);
}

Controller::~Controller() {
  events_.on_add = nullptr;  // the attachments go before the event log
  attachments_.clear();
  mesh_monitor_.reset();
  mesh_watcher_.reset();
}

std::string Controller::endpoint(const std::string& name) const {
  for (const auto& a : attachments_)
    if (auto ep = a->endpoint(); ep.name == name) return ep.url;
  return "";
}

Status Controller::setup_security() {
  const auto& sec = opts_.job.security;
  bool mesh_local = is_local_endpoint(opts_.job.mesh.bind);
  bool repl_local = is_local_endpoint(opts_.job.repl.bind);
  if (sec.server_key.empty()) {
    for (auto [key, ep, local] : {std::tuple{"mesh.bind", opts_.job.mesh.bind, mesh_local},
                                  std::tuple{"repl.bind", opts_.job.repl.bind, repl_local}})
      if (!local)
        return fail(key, " = ", ep,
                    " is reachable from other hosts; refusing to start without CURVE. Set "
                    "security.server_key and security.allow (see `salamander keygen`), or bind "
                    "127.0.0.1");
    return {};
  }
  auto rel = [&](const std::string& p) { return p[0] == '/' ? p : opts_.job.dir + "/" + p; };
  auto key = load_key_file(rel(sec.server_key));
  if (!key) return Error("security.server_key: " + key.error().message());
  if (key->secret_key.empty())
    return fail("security.server_key: ", sec.server_key, " holds no secret-key (use the .key file)");
  auto allow = Allowlist::load(rel(sec.allow));
  if (!allow) return Error("security.allow: " + allow.error().message());
  server_key_ = std::make_unique<KeyPair>(*key);
  allow_ = std::make_unique<Allowlist>(std::move(*allow));
  zap_ = std::make_unique<ZapHandler>(ctx_, *allow_);
  if (!mesh_local) make_curve_server(mesh_, *server_key_, kMeshDomain);
  spdlog::info("CURVE on for {}{}; {} keys allowed", mesh_local ? "" : "mesh ",
               repl_local ? "" : "repl", allow_->size());
  return {};
}

Status Controller::start() {
  SAL_TRY(job::check_data(opts_.job));
  SAL_TRY(setup_security());
  auto slice_key = ckpt::run_slice_mac_key(opts_.run_dir);  // the run's: a resumed controller keeps it
  if (!slice_key) return slice_key.error();
  slice_mac_key_ = *slice_key;
  SAL_TRY(attach_all());  // before the policies load: their events and decisions are seen
  planner_->policies().on_event = [this](policy::Kind k, const policy::SlotEvent& e) {
    events_.add(e.kind, kNoNode, membership_.epoch(), std::string(policy::kind_name(k)) + ": " + e.detail);
    bool swapped = e.kind == "policy_loaded" || e.kind == "policy_rollback";
    if (const auto* live = planner_->policies().slot(k).live(); swapped && live)
      journal(job::rec::Policy{std::string(policy::kind_name(k)), live->name(), live->source().text, live->number});
  };
  std::map<std::string, std::string> journaled;  // a resumed job's policy sources, by slot
  if (opts_.resume)
    for (const auto& [slot, p] : opts_.resume->policies) journaled[slot] = p.source;
  SAL_TRY(planner_->configure(opts_.resume ? &journaled : nullptr));
  // events.csv starts after the job's own policies loaded (the report marks the swaps that follow)
  std::map<std::string, uint64_t> events_before;  // a resumed run's, before this controller's
  if (!opts_.run_dir.empty() && opts_.resume) events_before = EventLog::count_kinds(opts_.run_dir + "/events.csv");
  if (!opts_.run_dir.empty()) events_.open_csv(opts_.run_dir + "/events.csv", opts_.resume.has_value());
  apply_control_options(mesh_);
  mesh_.set(zmq::sockopt::router_handover, 1);  // an agent reconnecting takes its identity back
  auto ep = bind_endpoint(mesh_, opts_.job.mesh.bind);
  if (!ep) return Error("mesh.bind: " + ep.error().message());
  mesh_endpoint_ = *ep;
  mesh_watcher_ = std::make_unique<ZmqWatcher>(loop_, mesh_, [this] { on_mesh_message(); });
  mesh_monitor_ = std::make_unique<SocketMonitor>(
      loop_, ctx_, mesh_, "mesh",
      [this](const ConnectionEvent& ev) { on_connection_event(ev.kind, ev.fd, ev.peer); });
  SAL_TRY(start_training());
  if (opts_.resume) tell([&](Attachment& a) { a.resumed(*opts_.resume, events_before); });

  tick_timer_.start(kTickMs, kTickMs, [this] { liveness_tick(); });
  uint64_t hb = uint64_t(opts_.job.mesh.heartbeat_ms);
  ping_timer_.start(hb, hb, [this] { send_pings(); });
  std::string endpoints = "mesh " + mesh_endpoint_;
  for (const auto& a : attachments_)
    if (auto e = a->endpoint(); !e.name.empty()) endpoints += ", " + e.name + " " + e.url;
  events_.add("controller_started", kNoNode, 0, endpoints);
  spdlog::info("controller for job '{}': {}", opts_.job.name, endpoints);
  state_changed();
  return {};
}

Status Controller::attach_all() {
  const AttachContext ctx{*this, loop_, ctx_, server_key_.get(), allow_.get()};
  for (const auto& make : opts_.attach) {
    auto a = make(ctx);
    if (!a) return a.error();
    attachments_.push_back(std::move(*a));
  }
  events_.on_add = [this](const std::string& kind) { tell([&](Attachment& a) { a.event(kind); }); };
  planner_->policies().on_decision = [this](policy::Kind k, const policy::Decision& d) {
    tell([&](Attachment& a) { a.policy_decision(k, d.ms); });
  };
  return {};
}

// ---------- sending ----------

void Controller::deliver(const std::string& rid, wire::Parts parts, wire::MsgType type) {
  parts.emplace(parts.begin(), rid.data(), rid.size());
  try {
    // A peer that just went away is reported by the monitor; a full queue is a frozen peer.
    if (!zmq::send_multipart(mesh_, parts, zmq::send_flags::dontwait))
      spdlog::debug("mesh: {} to {} dropped: send queue full", wire::type_name(type), hex_id(rid));
  } catch (const zmq::error_t& e) {
    spdlog::debug("mesh: {} to {} dropped: {}", wire::type_name(type), hex_id(rid), e.what());
  }
}

void Controller::reject(const std::string& rid, const std::string& peer, const Error& err) {
  uint64_t suppressed = 0;
  uint16_t code = err.code() ? uint16_t(err.code()) : uint16_t(wire::ErrorCode::malformed);
  if (bad_input_log_.allow(wire::error_code_name(code), mono_ns(), suppressed))
    spdlog::warn("mesh: rejected message from {}: {}{}", peer.empty() ? hex_id(rid) : peer, err.message(),
                 KindLog::more(suppressed));
  send_to(rid, wire::ErrorReply{code, err.message()});
}

// ---------- receiving ----------

void Controller::on_mesh_message() {
  wire::Parts parts;
  try {
    if (!recv_now(mesh_, parts)) return;
  } catch (const zmq::error_t& e) {
    spdlog::warn("mesh: receive failed: {}", e.what());
    return;
  }
  if (parts.empty()) return;
  std::string rid = parts[0].to_string();
  int fd = parts.size() > 1 ? source_fd(parts[1]) : -1;
  parts.erase(parts.begin());
  auto env = wire::open(parts);
  if (!env) {
    reject(rid, peer_address(fd), env.error());
    return;
  }
  handle(rid, fd, *env);
  changed();
}

void Controller::handle(const std::string& rid, int fd, const wire::Envelope& env) {
  using T = wire::MsgType;
  switch (env.type) {
    case T::register_node: return handle_register(rid, fd, env);
    case T::heartbeat: return handle_heartbeat(rid, env);
    case T::worker_event: return handle_worker_event(rid, env);
    case T::goodbye: return handle_goodbye(rid, env);
    case T::step_vote: return handle_vote(rid, env);
    case T::plan_ready: return handle_plan_ready(rid, env);
    case T::save_done: return handle_save_done(rid, env);
    case T::slice_report: return handle_slice_report(rid, env);
    case T::error: {
      auto m = wire::decode<wire::ErrorReply>(env);
      if (m) spdlog::warn("mesh: agent {} reports error {}: {}", hex_id(rid), m->code, m->message);
      return;
    }
    default:
      reject(rid, peer_address(fd),
             Error(std::string(wire::type_name(env.type)) + " is not accepted on the mesh endpoint",
                   int(wire::ErrorCode::bad_request)));
  }
}

// The live node behind `rid`, if it is the node it claims to be; otherwise replies with an error.
Node* Controller::sender(const std::string& rid, uint32_t claimed_id, const char* what) {
  Node* n = membership_.find(claimed_id);
  if (n && n->routing_id == rid && (n->live() || n->state == NodeState::draining)) return n;
  if (n && n->routing_id == rid && n->state == NodeState::left) return nullptr;  // late, harmless
  std::string why = !n ? "node " + std::to_string(claimed_id) + " is unknown"
                    : n->routing_id != rid ? "node " + std::to_string(claimed_id) + " belongs to another connection"
                    : "node " + std::to_string(claimed_id) + " is " + state_name(n->state) + " (" + n->cause + ")";
  reject(rid, "", Error(std::string(what) + ": " + why + "; register again", int(wire::ErrorCode::unknown_node)));
  return nullptr;
}

void Controller::handle_register(const std::string& rid, int fd, const wire::Envelope& env) {
  auto m = wire::decode<wire::RegisterNode>(env);
  if (!m) return reject(rid, peer_address(fd), m.error());
  if (stopping_) return send_to(rid, wire::Command{wire::Verb::stop, "job is stopping"});
  if (m->name.empty()) return reject(rid, peer_address(fd), Error("RegisterNode.name: empty", 5));
  if (auto bad = std::find_if(m->devices.begin(), m->devices.end(),
                              [](const std::string& d) { return !valid_device_name(d); });
      bad != m->devices.end())
    return reject(rid, peer_address(fd), Error("RegisterNode.devices: '" + *bad + "' is not a device", 5));
  if (Node* existing = membership_.find_by_routing(rid)) {
    // A repeated registration on the same connection (the first Welcome was lost): idempotent.
    return send_to(rid, welcome(existing->id));
  }
  Node info;
  info.name = m->name;
  info.host = m->host;
  info.pid = m->pid;
  info.devices = m->devices;
  info.routing_id = rid;
  info.fd = fd;
  info.addr = peer_address(fd);
  info.slice_endpoint = m->slice_endpoint;
  info.slice_key = m->slice_key;
  NodeId back = m->previous_id == kNoNode ? kNoNode : membership_.returning_id(m->previous_id, m->name);
  Node& n = back != kNoNode ? membership_.rejoin(std::move(info), back, mono_ns()) : membership_.join(std::move(info), mono_ns());
  journal(job::rec::Node{n.id, n.name, n.host});
  send_to(rid, welcome(n.id));
  send_to(rid, wire::JobSpec{opts_.job.file, opts_.job.dir, opts_.job.text, slice_mac_key_.hex()});
}

wire::Welcome Controller::welcome(NodeId id) const {
  const auto& mesh = opts_.job.mesh;
  return wire::Welcome{id, membership_.epoch(), uint32_t(mesh.heartbeat_ms), uint32_t(mesh.miss_limit), opts_.job.name,
                       uint32_t(mesh.controller_grace_ms), allow_ ? allow_->node_keys() : std::vector<std::string>{},
                       uint32_t(mesh.worker_restarts)};
}

void Controller::handle_heartbeat(const std::string& rid, const wire::Envelope& env) {
  auto m = wire::decode<wire::Heartbeat>(env);
  if (!m) return reject(rid, "", m.error());
  if (!sender(rid, m->node_id, "Heartbeat")) return;
  membership_.heartbeat(m->node_id, m->workers, mono_ns());
}

void Controller::handle_worker_event(const std::string& rid, const wire::Envelope& env) {
  auto m = wire::decode<wire::WorkerEvent>(env);
  if (!m) return reject(rid, "", m.error());
  if (!sender(rid, m->node_id, "WorkerEvent")) return;
  membership_.worker_event(m->node_id, *m, mono_ns());
  using K = wire::WorkerEventKind;
  if (m->kind == K::exited || m->kind == K::spawn_failed)
    worker_lost(m->node_id, m->index, "worker " + std::to_string(m->node_id) + "." + std::to_string(m->index) + " exited");
}

void Controller::handle_goodbye(const std::string& rid, const wire::Envelope& env) {
  auto m = wire::decode<wire::Goodbye>(env);
  if (!m) return reject(rid, "", m.error());
  Node* n = membership_.find(m->node_id);
  if (!n || n->routing_id != rid) return;
  feed(job::in::Lost{n->id, std::nullopt, "node " + std::to_string(n->id) + " left: " + m->reason});
  membership_.leave(n->id, m->reason, mono_ns());
  check_shutdown_done();
}

void Controller::handle_vote(const std::string& rid, const wire::Envelope& env) {
  auto m = wire::decode<wire::StepVote>(env);
  if (!m) return reject(rid, "", m.error());
  if (!sender(rid, m->node_id, "StepVote")) return;
  feed(job::in::Vote{std::move(*m)});
}

void Controller::handle_plan_ready(const std::string& rid, const wire::Envelope& env) {
  auto m = wire::decode<wire::PlanReady>(env);
  if (!m) return reject(rid, "", m.error());
  if (!sender(rid, m->node_id, "PlanReady")) return;
  feed(job::in::Ready{std::move(*m)});
}

void Controller::handle_save_done(const std::string& rid, const wire::Envelope& env) {
  auto m = wire::decode<wire::SaveDone>(env);
  if (!m) return reject(rid, "", m.error());
  if (!sender(rid, m->node_id, "SaveDone")) return;
  feed(job::in::Saved{std::move(*m)});
}

void Controller::handle_slice_report(const std::string& rid, const wire::Envelope& env) {
  auto m = wire::decode<wire::SliceReport>(env);
  if (!m) return reject(rid, "", m.error());
  if (!sender(rid, m->node_id, "SliceReport")) return;
  feed(job::in::Slices{std::move(*m)});
}

void Controller::on_connection_event(int kind, int fd, const std::string& peer) {
  if (kind == ConnectionEvent::handshake_failed) {
    uint64_t suppressed = 0;
    if (bad_input_log_.allow("handshake", mono_ns(), suppressed))
      spdlog::warn("mesh: a connection failed its handshake (not ZMTP, wrong version or bad key){}",
                   KindLog::more(suppressed));
    return;
  }
  if (kind != ConnectionEvent::disconnected) return;
  // Whatever the peer sent before its connection closed (a goodbye, a worker exit) comes first.
  mesh_watcher_->drain();
  Node* n = membership_.find_by_fd(fd);
  if (!n) {
    if (!membership_.find_by_fd_any(fd))
      spdlog::info("mesh: connection from {} closed before registering (peer left, or libzmq dropped "
                   "it: oversized or malformed frames)", peer.empty() ? "?" : peer);
    return;
  }
  if (n->state == NodeState::draining || stopping_) {
    membership_.leave(n->id, "connection closed after " + std::string(stopping_ ? "stop" : "drain"), mono_ns());
    check_shutdown_done();
  } else {
    node_lost(n->id, "connection closed (agent process exited)");
  }
  changed();
}

// ---------- liveness ----------

void Controller::liveness_tick() {
  // Count heartbeats already queued (e.g. behind a long REPL evaluation) before judging silence.
  mesh_watcher_->drain();
  for (NodeId id : membership_.tick(mono_ns())) {
    feed(job::in::Lost{id, std::nullopt, "node " + std::to_string(id) + " died"});
    changed();
  }
}

void Controller::send_pings() {
  next_ping_ns_ = mono_ns() + opts_.job.mesh.heartbeat_ms * 1'000'000;
  broadcast(wire::Ping{membership_.epoch(), driver_->steps().committed(), ++ping_seq_});
}

void Controller::service() {
  if (!mesh_watcher_) return;  // before start(): policies load before the endpoints exist
  mesh_watcher_->drain();
  mesh_monitor_->drain();
  liveness_tick();
  if (mono_ns() >= next_ping_ns_) send_pings();
}

void Controller::node_lost(NodeId id, const std::string& cause) {
  membership_.lose(id, cause, mono_ns());
  feed(job::in::Lost{id, std::nullopt, "node " + std::to_string(id) + " lost: " + cause});
}

void Controller::worker_lost(NodeId id, uint32_t index, const std::string& cause) {
  feed(job::in::Lost{id, index, cause});
}

}  // namespace sal::mesh
