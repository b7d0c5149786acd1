// repl_server.cpp — see repl_server.h.
#include "mesh/repl_server.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/strings.h"
#include "lua/convert.h"
#include "mesh/controller.h"
#include "mesh/endpoint.h"
#include "mesh/monitor.h"
#include "mesh/security.h"
#include "mesh/zmq_uv.h"

namespace sal::mesh {

// print() output kept per evaluation; more is cut with a note.
constexpr size_t kOutputCap = 1u << 20;
// Characters of a chunk quoted in the audit log.
constexpr size_t kAuditChunkChars = 200;

ReplServer::ReplServer(uv_loop_t* loop, zmq::context_t& ctx, Controller& controller, ReplOptions opts)
    : loop_(loop),
      ctx_(ctx),
      controller_(controller),
      opts_(std::move(opts)),
      socket_(ctx, zmq::socket_type::router) {
  register_controller_api(registry_, controller_);
  register_policy_api(registry_, controller_);
  register_training_api(registry_, controller_);
  if (opts_.modules) opts_.modules(registry_);
}

ReplServer::~ReplServer() {
  monitor_.reset();
  watcher_.reset();
  if (audit_) std::fclose(audit_);
}

Status ReplServer::start() {
  apply_control_options(socket_);
  if (opts_.curve) make_curve_server(socket_, *opts_.curve, kReplDomain);
  auto ep = bind_endpoint(socket_, opts_.bind);
  if (!ep) return Error("repl.bind: " + ep.error().message());
  endpoint_ = *ep;
  if (!opts_.audit_path.empty()) audit_ = std::fopen(opts_.audit_path.c_str(), "a");
  watcher_ = std::make_unique<ZmqWatcher>(loop_, socket_, [this] { on_message(); });
  monitor_ = std::make_unique<SocketMonitor>(loop_, ctx_, socket_, "repl", [this](const ConnectionEvent& ev) {
    if (ev.kind != ConnectionEvent::disconnected) return;
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.fd == ev.fd) {
        spdlog::info("repl: session {} closed (client disconnected)", it->second.id);
        sessions_.erase(it);
        return;
      }
    }
  });
  return {};
}

template <class M>
void ReplServer::reply(const std::string& rid, const M& msg) {
  if (auto why = send_routed(socket_, rid, msg); !why.empty()) spdlog::debug("repl: reply dropped: {}", why);
}

void ReplServer::evict_if_full() {
  if (sessions_.size() < opts_.max_sessions) return;
  auto oldest = sessions_.begin();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
    if (it->second.last_used_ns < oldest->second.last_used_ns) oldest = it;
  spdlog::info("repl: dropping idle session {} ({} sessions is the limit)", oldest->second.id,
               opts_.max_sessions);
  sessions_.erase(oldest);
}

ReplServer::Session* ReplServer::session_for(const std::string& rid, int fd, const std::string& user) {
  auto it = sessions_.find(rid);
  if (it != sessions_.end()) return &it->second;
  auto role = session_role(user, opts_.allow);
  if (!role) return nullptr;
  evict_if_full();
  Session s;
  s.id = next_session_++;
  s.rid = rid;
  s.fd = fd;
  s.role = *role;
  s.user = user.empty() ? "local" : user;
  Session& stored = sessions_.emplace(rid, std::move(s)).first->second;
  lua::SandboxOptions so;
  so.name = "repl session " + std::to_string(stored.id);
  so.memory_limit = opts_.memory_limit;
  so.strict_reads = true;
  so.print = [&stored](const std::string& line) {
    if (stored.output.size() > kOutputCap) return;
    stored.output += line + "\n";
    if (stored.output.size() > kOutputCap) stored.output += "… (output truncated)\n";
  };
  stored.sandbox = std::make_unique<lua::Sandbox>(so);
  registry_.install(*stored.sandbox, stored.role);
  spdlog::info("repl: session {} opened by {} ({})", stored.id, stored.user, role_name(stored.role));
  return &stored;
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
    if (bad_input_log_.allow(mono_ns(), suppressed))
      spdlog::warn("repl: rejected message from {}: {}", peer_address(fd), env.error().message());
    return reply(rid, wire::ErrorReply{uint16_t(env.error().code()), env.error().message()});
  }
  Session* s = session_for(rid, fd, user);
  if (!s) return reply(rid, wire::ErrorReply{uint16_t(wire::ErrorCode::not_allowed), "no role for '" + user + "'"});
  s->last_used_ns = mono_ns();
  switch (env->type) {
    case wire::MsgType::repl_hello: {
      auto m = wire::decode<wire::ReplHello>(*env);
      if (!m) return reply(rid, wire::ErrorReply{uint16_t(wire::ErrorCode::malformed), m.error().message()});
      return reply(rid, wire::ReplWelcome{"salamander controller", s->id, std::string(role_name(s->role)),
                                          controller_.job().name, uint32_t(opts_.budget_ms)});
    }
    case wire::MsgType::repl_eval: {
      auto m = wire::decode<wire::ReplEval>(*env);
      if (!m) return reply(rid, wire::ErrorReply{uint16_t(wire::ErrorCode::malformed), m.error().message()});
      return eval(*s, *m);
    }
    case wire::MsgType::repl_complete: {
      auto m = wire::decode<wire::ReplComplete>(*env);
      if (!m) return reply(rid, wire::ErrorReply{uint16_t(wire::ErrorCode::malformed), m.error().message()});
      return complete(*s, *m);
    }
    case wire::MsgType::repl_bye:
      spdlog::info("repl: session {} closed by the client", s->id);
      sessions_.erase(rid);
      return;
    default:
      return reply(rid, wire::ErrorReply{uint16_t(wire::ErrorCode::bad_request),
                                         std::string(wire::type_name(env->type)) +
                                             " is not accepted on the REPL endpoint"});
  }
}

void ReplServer::eval(Session& s, const wire::ReplEval& req) {
  lua::Sandbox& sb = *s.sandbox;
  lua_State* L = sb.L();
  int top = lua_gettop(L);
  wire::ReplResult res;
  res.id = req.id;
  s.output.clear();
  int64_t t0 = mono_ns();
  // Like lua.c: try it as an expression first, then as statements.
  Status st = sb.load("return " + req.chunk, "=repl");
  if (!st) st = sb.load(req.chunk, "=repl");
  if (st) {
    lua::Budget budget;
    budget.deadline_ms = opts_.budget_ms;
    budget.what = "repl.budget_ms (" + std::to_string(opts_.budget_ms) + " ms)";
    budget.service = [this] {
      try {
        controller_.service();
      } catch (const std::exception& e) {
        spdlog::error("repl: mesh service during evaluation failed: {}", e.what());
      }
    };
    st = sb.call(0, LUA_MULTRET, budget);
  }
  res.elapsed_us = uint64_t((mono_ns() - t0) / 1000);
  res.output = std::move(s.output);
  s.output.clear();
  if (!st) {
    res.ok = false;
    res.error = st.error().message();
    lua_settop(L, top);
    audit(s, req.chunk, "error: " + clip(res.error, 200));
    return reply(s.rid, res);
  }
  int n = lua_gettop(L) - top;
  res.ok = true;
  if (req.format == wire::ValueFormat::json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (int i = 1; i <= n; ++i) arr.push_back(lua::to_json(L, top + i));
    res.value = arr.dump();
  } else {
    std::vector<std::string> parts;
    for (int i = 1; i <= n; ++i) parts.push_back(lua::render(L, top + i));
    res.value = join(parts, "\t");
  }
  lua_settop(L, top);
  audit(s, req.chunk, "ok in " + std::to_string(res.elapsed_us / 1000) + " ms");
  reply(s.rid, res);
}

void ReplServer::complete(Session& s, const wire::ReplComplete& req) {
  wire::ReplCompletions out;
  out.id = req.id;
  out.candidates = registry_.complete(req.line, s.role, s.sandbox->global_names());
  if (out.candidates.size() > wire::kListMax) out.candidates.resize(wire::kListMax);
  reply(s.rid, out);
}

void ReplServer::audit(const Session& s, const std::string& chunk, const std::string& outcome) {
  std::string line = "session " + std::to_string(s.id) + " " + s.user + " (" +
                     std::string(role_name(s.role)) + ") eval " + json_quote(clip(chunk, kAuditChunkChars)) +
                     " -> " + outcome;
  spdlog::info("audit: {}", line);
  if (audit_) {
    std::fprintf(audit_, "%lld %s\n", (long long)wall_ms(), line.c_str());
    std::fflush(audit_);
  }
}

}  // namespace sal::mesh
