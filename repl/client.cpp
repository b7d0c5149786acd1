// client.cpp — see client.h.
#include "repl/client.h"

#include <lua.hpp>
#include <zmq_addon.hpp>

#include <cstring>

#include "core/paths.h"
#include "wire/curve.h"
#include "wire/repl_token.h"

namespace sal::repl {

// How long connect() waits for the controller's welcome.
constexpr int64_t kHelloTimeoutMs = 3000;
// Slack added to the server's evaluation budget when waiting for a result.
constexpr int64_t kBudgetSlackMs = 5000;

Client::Client(ClientOptions opts) : opts_(std::move(opts)), sock_(ctx_, zmq::socket_type::dealer) {
  sock_.set(zmq::sockopt::linger, 100);
  sock_.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
}

Client::~Client() = default;

// Our credentials: CURVE keys on the socket, or on a local endpoint the job's token and our
// working directory (the client is on the controller's machine: its relative paths are ours).
Result<wire::ReplHello> Client::hello() {
  wire::ReplHello hello{"salamander repl"};
  if (!opts_.server_public_key.empty()) {
    auto own = wire::load_key_file(opts_.key_file);
    if (!own) return Error("--key: " + own.error().message());
    wire::make_curve_client(sock_, opts_.server_public_key, *own);
    return hello;
  }
  if (!opts_.token_file.empty()) {
    auto token = wire::read_repl_token(opts_.token_file);
    if (!token) return Error("--token-file: " + token.error().message());
    hello.token = *token;
  } else {
    hello.token = wire::find_repl_token(opts_.endpoint);
  }
  hello.cwd = absolute_path(".");
  return hello;
}

Result<wire::ReplWelcome> Client::connect() {
  auto hello = this->hello();
  if (!hello) return hello.error();
  try {
    sock_.connect(opts_.endpoint);
  } catch (const zmq::error_t& e) {
    return fail("cannot connect to ", opts_.endpoint, ": ", e.what());
  }
  int64_t saved = opts_.timeout_ms;
  opts_.timeout_ms = saved ? saved : kHelloTimeoutMs;
  auto w = request<wire::ReplHello, wire::ReplWelcome>(*hello);
  opts_.timeout_ms = saved;
  if (!w) return w.error().with_context("controller at " + opts_.endpoint);
  budget_ms_ = w->budget_ms;
  return w;
}

Result<wire::ReplResult> Client::eval(const std::string& chunk, wire::ValueFormat format) {
  if (chunk.size() > wire::kChunkMax) return fail("chunk of ", chunk.size(), " bytes exceeds ", wire::kChunkMax);
  return request<wire::ReplEval, wire::ReplResult>(wire::ReplEval{next_id_++, chunk, format});
}

Result<std::vector<std::string>> Client::complete(const std::string& line) {
  auto r = request<wire::ReplComplete, wire::ReplCompletions>(wire::ReplComplete{next_id_++, line});
  if (!r) return r.error();
  return r->candidates;
}

void Client::bye() {
  (void)zmq::send_multipart(sock_, wire::encode(wire::ReplBye{}), zmq::send_flags::dontwait);
}

Result<wire::Parts> Client::receive(int64_t timeout_ms) {
  zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0)
    return fail("no answer within ", timeout_ms, " ms (is the controller running?)");
  wire::Parts parts;
  if (!zmq::recv_multipart(sock_, std::back_inserter(parts), zmq::recv_flags::dontwait))
    return fail("receive failed");
  return parts;
}

Result<wire::Parts> Client::raw_request(wire::Parts frames, int64_t timeout_ms) {
  if (!zmq::send_multipart(sock_, frames, zmq::send_flags::dontwait)) return fail("send failed");
  return receive(timeout_ms);
}

template <class Req, class Rep>
Result<Rep> Client::request(const Req& req) {
  int64_t timeout = opts_.timeout_ms ? opts_.timeout_ms : budget_ms_ + kBudgetSlackMs;
  if (!zmq::send_multipart(sock_, wire::encode(req), zmq::send_flags::dontwait)) return fail("send failed");
  for (;;) {
    auto parts = receive(timeout);
    if (!parts) return parts.error();
    auto env = wire::open(*parts);
    if (!env) return fail("bad reply: ", env.error().message());
    if (env->type == wire::MsgType::error) {
      auto e = wire::decode<wire::ErrorReply>(*env);
      return fail("controller refused the request: ", e ? e->message : "malformed error");
    }
    if (env->type != Rep::kType) continue;  // a stale reply to an earlier timed-out request
    auto rep = wire::decode<Rep>(*env);
    if (!rep) return fail("bad reply: ", rep.error().message());
    if constexpr (requires { rep->id; req.id; }) {
      if (rep->id != req.id) continue;
    }
    return rep;
  }
}

ChunkState check_chunk(const std::string& chunk, std::string* error) {
  lua_State* L = luaL_newstate();
  if (!L) return ChunkState::error;
  auto try_load = [&](const std::string& text) {
    int rc = luaL_loadbuffer(L, text.data(), text.size(), "=repl");
    std::string msg = rc ? lua_tostring(L, -1) : "";
    lua_settop(L, 0);
    return std::pair{rc, msg};
  };
  auto [rc_expr, msg_expr] = try_load("return " + chunk);
  auto [rc, msg] = try_load(chunk);
  lua_close(L);
  if (rc_expr == 0 || rc == 0) return ChunkState::complete;
  // An incomplete chunk fails at the end of input: the message ends with "near '<eof>'" (lua.c's
  // test for multi-line input).
  const std::string eof = "'<eof>'";
  if (msg.size() >= eof.size() && msg.compare(msg.size() - eof.size(), eof.size(), eof) == 0)
    return ChunkState::incomplete;
  if (error) *error = msg;
  return ChunkState::error;
}

}  // namespace sal::repl
