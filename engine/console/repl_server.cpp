// repl_server.cpp — see repl_server.h.
#include "console/repl_server.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <variant>

#include "core/clock.h"
#include "core/lifetime.h"
#include "core/strings.h"
#include "lua/convert.h"
#include "mesh/controller.h"
#include "mesh/endpoint.h"
#include "mesh/monitor.h"
#include "console/eval_pacing.h"
#include "console/repl_eval.h"
#include "mesh/security.h"
#include "mesh/zmq_uv.h"
#include "wire/repl_token.h"

namespace sal::console {

using mesh::apply_control_options;
using mesh::bind_endpoint;
using mesh::ConnectionEvent;
using mesh::kReplDomain;
using mesh::make_curve_server;
using mesh::peer_address;
using mesh::recv_now;
using mesh::send_routed;
using mesh::session_role;
using mesh::source_fd;
using mesh::user_id;

// print() output kept per evaluation; more is cut with a note.
constexpr size_t kOutputCap = 1u << 20;
// Characters of a chunk (or of a call's arguments) quoted in the audit log.
constexpr size_t kAuditChunkChars = 200;
// How long replies still queued when the controller stops may take to leave.
constexpr int kLastReplyLingerMs = 500;
// Replies queued for one client before further ones are dropped.
constexpr int kReplyQueue = 16;
// Evaluation threads run below the workers' compute threads (nice 5): a runaway chunk takes about a
// third of one worker's CPU weight (at 5 it took a full worker's and cut the steps/s to a third in a
// CI run). Not the lowest: at 19 a chunk on a machine loaded with other programs was not run for long
// enough to notice its own deadline (it ended 474 ms past budget + 100 ms in another CI run). A
// short chunk answers at once: it mostly waits on the loop.
constexpr int kEvalNice = 10;

ReplServer::ReplServer(uv_loop_t* loop, zmq::context_t& ctx, Controller& controller, ReplOptions opts)
    : loop_(loop),
      ctx_(ctx),
      controller_(controller),
      opts_(std::move(opts)),
      socket_(ctx, zmq::socket_type::router),
      calls_(loop) {
  register_controller_api(registry_, controller_);
  register_policy_api(registry_, controller_);
  register_training_api(registry_, controller_);
  if (opts_.modules) opts_.modules(registry_);
  registry_.on_acting_call = [this](lua_State* L, const lua::ApiEntry& e) { audit_call(L, e); };
}

ReplServer::~ReplServer() {
  // Evaluation threads waiting for the loop are released (their API call fails), then finish
  // within their budget; the replies they posted (job.stop's own, say) are sent, and given a
  // moment to leave before the socket closes.
  calls_.close();
  for (auto& [rid, s] : sessions_)
    if (s->evaluation.joinable()) {
      if (s->running) s->running->pace(false);  // no loop turns from here: it must see its budget
      s->evaluation.join();
    }
  calls_.finish();
  socket_.set(zmq::sockopt::linger, kLastReplyLingerMs);
  sessions_.clear();
  monitor_.reset();
  watcher_.reset();
  if (audit_) std::fclose(audit_);
}

Status ReplServer::start() {
  apply_control_options(socket_);
  // A client answers one reply before it asks again; one that never reads gets a few queued, then
  // its replies are dropped: memory stays bounded by kReplyQueue replies.
  socket_.set(zmq::sockopt::sndhwm, kReplyQueue);
  if (opts_.curve) make_curve_server(socket_, *opts_.curve, kReplDomain);
  auto ep = bind_endpoint(socket_, opts_.bind);
  if (!ep) return Error("repl.bind: " + ep.error().message());
  endpoint_ = *ep;
  if (!opts_.audit_path.empty()) audit_ = std::fopen(opts_.audit_path.c_str(), "a");
  watcher_ = std::make_unique<ZmqWatcher>(loop_, socket_, [this] { on_message(); });
  monitor_ = std::make_unique<SocketMonitor>(loop_, ctx_, socket_, "repl", [this](const ConnectionEvent& ev) {
    if (ev.kind == ConnectionEvent::handshake_failed) {
      uint64_t suppressed = 0;
      if (bad_input_log_.allow("handshake", mono_ns(), suppressed))
        spdlog::warn("repl: a connection failed its handshake (not ZMTP, wrong version or bad key){}",
                     KindLog::more(suppressed));
      return;
    }
    if (ev.kind != ConnectionEvent::disconnected) return;
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second->fd == ev.fd) return close_session(it, "client disconnected");
  });
  return {};
}

template <class M>
void ReplServer::reply(const std::string& rid, const M& msg) {
  if (auto why = send_routed(socket_, rid, msg); !why.empty()) spdlog::debug("repl: reply dropped: {}", why);
}

void ReplServer::close_session(Sessions::iterator it, const char* why) {
  Session& s = *it->second;
  if (s.busy) {  // its thread still uses the state: the session goes when the chunk ends
    s.closing = true;
    return;
  }
  spdlog::debug("repl: session {} closed ({})", s.id, why);
  sessions_.erase(it);
}

// Drops the least recently used idle session when the table is full; false if every session is busy.
bool ReplServer::make_room() {
  if (sessions_.size() < opts_.max_sessions) return true;
  auto oldest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
    if (!it->second->busy && (oldest == sessions_.end() || it->second->last_used_ns < oldest->second->last_used_ns))
      oldest = it;
  if (oldest == sessions_.end()) return false;
  spdlog::debug("repl: dropping idle session {} ({} sessions is the limit)", oldest->second->id, opts_.max_sessions);
  sessions_.erase(oldest);
  return true;
}

ReplServer::Session* ReplServer::session_for(const std::string& rid, int fd, const std::string& user,
                                             const wire::ReplHello* hello) {
  auto it = sessions_.find(rid);
  if (it != sessions_.end()) return it->second.get();
  auto role = session_role(user, opts_.allow);
  if (!role || !make_room()) return nullptr;
  auto owned = std::make_unique<Session>();
  Session& s = *owned;
  s.id = next_session_++;
  s.rid = rid;
  s.fd = fd;
  s.role = *role;
  s.user = user.empty() ? "local" : user;
  lua::SandboxOptions so;
  so.name = "repl session " + std::to_string(s.id);
  so.memory_limit = opts_.memory_limit;
  so.strict_reads = true;
  so.print = [&s](const std::string& line) {
    if (s.output.size() > kOutputCap) return;
    s.output += line + "\n";
    if (s.output.size() > kOutputCap) s.output += "… (output truncated)\n";
  };
  s.sandbox = std::make_unique<lua::Sandbox>(so);
  s.sandbox->set_identity(s.user + " (" + std::string(role_name(s.role)) + ", REPL session " + std::to_string(s.id) + ")");
  // A local client is on this machine: its relative paths mean its own directory.
  if (!opts_.curve && hello && hello->cwd.rfind('/', 0) == 0) s.sandbox->set_working_dir(hello->cwd);
  registry_.install(*s.sandbox, s.role);
  spdlog::debug("repl: session {} opened by {} ({})", s.id, s.user, role_name(s.role));
  sessions_.emplace(rid, std::move(owned));
  return &s;
}

namespace {

template <class M>
Result<ReplRequest> decoded(const wire::Envelope& env) {
  auto m = wire::decode<M>(env);
  if (!m) return Error(m.error().message(), int(wire::ErrorCode::malformed));
  return ReplRequest(std::move(*m));
}

// A REPL message's body, decoded whoever sent it: malformed input is named as such (field and
// bound) before anything else is decided; a message of another endpoint is a bad request.
Result<ReplRequest> decode_request(const wire::Envelope& env) {
  switch (env.type) {
    case wire::MsgType::repl_hello: return decoded<wire::ReplHello>(env);
    case wire::MsgType::repl_eval: return decoded<wire::ReplEval>(env);
    case wire::MsgType::repl_complete: return decoded<wire::ReplComplete>(env);
    case wire::MsgType::repl_bye: return decoded<wire::ReplBye>(env);
    default:
      return Error(std::string(wire::type_name(env.type)) + " is not accepted on the REPL endpoint",
                   int(wire::ErrorCode::bad_request));
  }
}

}  // namespace

// Why a message from a client without a session may not open one (empty: it may): under CURVE a
// key without a role; on a local endpoint anything but a ReplHello with the controller's token.
std::string ReplServer::refusal(const std::string& rid, const std::string& user, const wire::ReplHello* hello) const {
  if (sessions_.count(rid)) return "";
  if (!session_role(user, opts_.allow)) return "no role for '" + user + "'";
  if (opts_.token.empty()) return "";
  std::string need = "this REPL endpoint admits a session only with its job's token (loopback is reachable by "
                     "every user of the machine): " + opts_.token_where;
  if (!hello) return "no session: say ReplHello with the token first; " + need;
  if (hello->token.empty()) return "no token given; " + need;
  if (!wire::same_token(hello->token, opts_.token)) return "wrong token; " + need;
  return "";
}

void ReplServer::on_message() {
  wire::Parts parts;
  try {
    if (!recv_now(socket_, parts)) return;
  } catch (const zmq::error_t& e) {
    spdlog::warn("repl: receive failed: {}", e.what());
    return;
  }
  if (parts.empty()) return;
  std::string rid = parts[0].to_string();
  int fd = parts.size() > 1 ? source_fd(parts[1]) : -1;
  std::string user = parts.size() > 1 ? user_id(parts[1]) : "";
  parts.erase(parts.begin());
  auto env = wire::open(parts);
  if (!env) {
    uint64_t suppressed = 0;
    if (bad_input_log_.allow(wire::error_code_name(env.error().code()), mono_ns(), suppressed))
      spdlog::warn("repl: rejected message from {}: {}{}", peer_address(fd), env.error().message(),
                   KindLog::more(suppressed));
    return reply(rid, wire::ErrorReply{uint16_t(env.error().code()), env.error().message()});
  }
  auto req = decode_request(*env);
  if (!req) return reply(rid, wire::ErrorReply{uint16_t(req.error().code()), req.error().message()});
  const auto* hello = std::get_if<wire::ReplHello>(&*req);
  if (auto why = refusal(rid, user, hello); !why.empty())
    return reply(rid, wire::ErrorReply{uint16_t(wire::ErrorCode::not_allowed), why});
  Session* s = session_for(rid, fd, user, hello);
  if (!s) return reply(rid, wire::ErrorReply{uint16_t(wire::ErrorCode::not_allowed), "every session is busy; try again shortly"});
  s->last_used_ns = mono_ns();
  serve(*s, *req);
}

// A request of a session's client: the welcome, an evaluation, completions, or goodbye.
void ReplServer::serve(Session& s, const ReplRequest& req) {
  if (std::holds_alternative<wire::ReplHello>(req))
    return reply(s.rid, wire::ReplWelcome{"salamander controller", s.id, std::string(role_name(s.role)),
                                          controller_.job().name, uint32_t(opts_.budget_ms)});
  if (const auto* m = std::get_if<wire::ReplEval>(&req)) return eval(s, *m);
  if (const auto* m = std::get_if<wire::ReplComplete>(&req)) return complete(s, *m);
  close_session(sessions_.find(s.rid), "closed by the client");
}

void ReplServer::eval(Session& s, const wire::ReplEval& req) {
  if (s.busy) {
    wire::ReplResult busy;
    busy.id = req.id;
    busy.error = "session " + std::to_string(s.id) + " is still evaluating its previous chunk";
    return reply(s.rid, busy);
  }
  lua::Budget budget;
  budget.deadline_ms = opts_.budget_ms;
  budget.what = "repl.budget_ms (" + std::to_string(opts_.budget_ms) + " ms)";
  s.busy = true;
  uint64_t id = s.id;
  auto running = std::make_shared<EvalThread>();
  try {
    s.evaluation = std::thread([this, &s, id, req, budget, running] {
      block_signals_in_this_thread();
      lower_this_thread_priority(kEvalNice);
      running->started();
      set_thread_loop_calls(&calls_);
      wire::ReplResult res = evaluate(*s.sandbox, s.output, req, budget);
      {
        std::lock_guard lock(running->mu);
        running->ended = true;
      }
      // From here on the session belongs to the loop again.
      calls_.post([this, id, res = std::move(res), chunk = req.chunk]() mutable {
        evaluated(id, std::move(res), chunk);
      });
    });
    s.running = running;
    pace(s);
  } catch (const std::system_error& e) {
    s.busy = false;
    wire::ReplResult failed;
    failed.id = req.id;
    failed.error = std::string("cannot start an evaluation thread: ") + e.what();
    reply(s.rid, failed);
  }
}

// On the loop: the chunk just started is looked at every kEvalPaceCheckMs, goes into idle time once it
// has computed kEvalForegroundCpuMs of its own, and takes the normal class back at its budget
// (console/eval_pacing.h; where the way back is refused it stops at its budget all the same, once it
// runs).
void ReplServer::pace(Session& s) {
  EvalPacing pacing(opts_.budget_ms);
  if (!pacing.needed()) return;
  if (!s.pacing) s.pacing = std::make_unique<mesh::Timer>(loop_);
  const int64_t began_ns = mono_ns();
  s.pacing->start(kEvalPaceCheckMs, kEvalPaceCheckMs, [&s, running = s.running, pacing, began_ns]() mutable {
    const PaceMove move = pacing.look((mono_ns() - began_ns) / 1'000'000, running->cpu_ms());
    if (move != PaceMove::none) running->pace(move == PaceMove::to_idle);
    if (pacing.done()) s.pacing->stop();
  });
}

// Moves the thread by its id while it runs: holding the lock, it cannot end meanwhile.
void ReplServer::EvalThread::pace(bool idle) {
  std::lock_guard lock(mu);
  if (tid == 0 || ended) return;
  if (!run_in_idle_time(tid, idle) && !idle)
    spdlog::debug("repl: an evaluation thread cannot leave idle time (no CAP_SYS_NICE)");
}

// Set by the thread itself as it starts: its id, and the clock of its CPU time.
void ReplServer::EvalThread::started() {
  std::lock_guard lock(mu);
  tid = this_thread_id();
  has_clock = pthread_getcpuclockid(pthread_self(), &cpu_clock) == 0;
}

// Its CPU time so far (0 before it starts, once it ended, or where its clock cannot be read).
int64_t ReplServer::EvalThread::cpu_ms() {
  std::lock_guard lock(mu);
  timespec ts{};
  if (!has_clock || ended || clock_gettime(cpu_clock, &ts) != 0) return 0;
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// On the loop: a chunk's evaluation ended (its thread is finishing).
void ReplServer::evaluated(uint64_t session_id, wire::ReplResult res, const std::string& chunk) {
  auto it = std::find_if(sessions_.begin(), sessions_.end(), [&](const auto& kv) { return kv.second->id == session_id; });
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  if (s.pacing) s.pacing->stop();
  if (s.evaluation.joinable()) s.evaluation.join();
  s.running.reset();
  s.busy = false;
  s.last_used_ns = mono_ns();
  audit(s, chunk, res.ok ? "ok in " + std::to_string(res.elapsed_us / 1000) + " ms" : "error: " + clip(res.error, 200));
  if (s.closing) return close_session(it, "client went away during its chunk");
  reply(s.rid, res);
}

void ReplServer::complete(Session& s, const wire::ReplComplete& req) {
  wire::ReplCompletions out;
  out.id = req.id;
  // While a chunk runs its state belongs to the evaluation thread: complete the API names only.
  std::vector<std::string> globals;
  if (!s.busy) globals = s.sandbox->global_names(lua::ApiRegistry::completion_word(req.line), lua::ApiRegistry::kMaxCompletions);
  out.candidates = registry_.complete(req.line, s.role, globals);
  if (out.candidates.size() > wire::kListMax) out.candidates.resize(wire::kListMax);
  reply(s.rid, out);
}

void ReplServer::audit_line(const std::string& line) {
  spdlog::info("audit: {}", line);
  std::lock_guard lock(audit_mu_);
  if (audit_) {
    std::fprintf(audit_, "%lld %s\n", (long long)wall_ms(), line.c_str());
    std::fflush(audit_);
  }
}

void ReplServer::audit(const Session& s, const std::string& chunk, const std::string& outcome) {
  audit_line("session " + std::to_string(s.id) + " " + s.user + " (" + std::string(role_name(s.role)) + ") eval " +
             json_quote(clip(chunk, kAuditChunkChars)) + " -> " + outcome);
}

// On the evaluation thread, before a function that acts runs: who calls what, with which arguments.
void ReplServer::audit_call(lua_State* L, const lua::ApiEntry& e) {
  std::vector<std::string> args;
  for (int i = 1; i <= lua_gettop(L); ++i) args.push_back(lua::render_quote(L, i, kAuditChunkChars));
  audit_line(caller(L) + " calls " + e.qualified() + "(" + clip(join(args, ", "), kAuditChunkChars) + ")");
}

std::string caller(lua_State* L) {
  const std::string& who = lua::Sandbox::identity(L);
  return who.empty() ? "controller" : who;
}

void add_controller_fn(lua::ApiRegistry& reg, Controller& c, const char* module, const char* name,
                       const char* signature, const char* doc, Role role, ControllerFn fn, Runs runs) {
  if (runs == Runs::here) {
    reg.add({module, name, signature, doc, role, [&c, fn](lua_State* L) { return fn(c, L); }});
    return;
  }
  reg.add({module, name, signature, doc, role,
           [&c, fn](lua_State* L) { return call_on_loop(L, [&c, fn](lua_State* S) { return fn(c, S); }); }});
}

}  // namespace sal::console
