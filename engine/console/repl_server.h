// repl_server.h — the controller's REPL endpoint. Each connection (a ROUTER identity) is a session
// with its own sandboxed Lua state over the read-only controller API (job_api.cpp) for its role:
// under CURVE the allowlist's role of its key, on a local endpoint admin — opened only by a
// ReplHello carrying the controller's token (wire/repl_token.h), as loopback is no trust boundary
// on a shared machine. Its state is kept from one chunk to the next. A chunk is evaluated on a
// thread of its own, off the controller's loop (repl_eval.h), under the session's budget: the loop
// keeps serving heartbeats, votes, commits and the other sessions however long the chunk runs, and
// the API reaches controller state on the loop thread only. Completion and help come from the same
// registration table that installs the API. Every evaluation, and every call of a function that
// acts, is audit-logged with the session's user and role.
#pragma once

#include <time.h>
#include <uv.h>
#include <zmq.hpp>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include "core/ids.h"
#include "core/log.h"
#include "lua/registry.h"
#include "lua/sandbox.h"
#include "console/loop_calls.h"
#include "mesh/timer.h"
#include "wire/codec.h"

namespace sal::wire {
struct KeyPair;
}

namespace sal::mesh {
class Controller;
class ZmqWatcher;
class SocketMonitor;
class Allowlist;
}  // namespace sal::mesh

namespace sal::console {

// The mesh's parts the console works with.
using mesh::Allowlist;
using mesh::Controller;
using mesh::SocketMonitor;
using mesh::ZmqWatcher;

// What a REPL client may send.
using ReplRequest = std::variant<wire::ReplHello, wire::ReplEval, wire::ReplComplete, wire::ReplBye>;

struct ReplOptions {
  std::string bind;
  int64_t budget_ms = 1000;
  size_t memory_limit = 64u << 20;
  size_t max_sessions = 32;
  const wire::KeyPair* curve = nullptr;     // CURVE server key when the endpoint is not local
  const Allowlist* allow = nullptr;   // roles of CURVE clients
  // Without CURVE: the token a session's ReplHello must carry (wire/repl_token.h), and where its
  // files are, for the refusal's message. Empty: every local client is admitted (tests of the server).
  std::string token;
  std::string token_where;
  std::string audit_path;             // audit log file (empty: log only)
  // Modules registered from above the controller (the simulator's sim.*), after the controller's own.
  std::function<void(lua::ApiRegistry&)> modules;
};

class ReplServer {
 public:
  ReplServer(uv_loop_t* loop, zmq::context_t& ctx, Controller& controller, ReplOptions opts);
  ~ReplServer();

  Status start();
  const std::string& endpoint() const { return endpoint_; }
  // Where the token's files are (known once the endpoint is bound), for the refusal's message.
  void set_token_where(std::string where) { opts_.token_where = std::move(where); }
  size_t sessions() const { return sessions_.size(); }

 private:
  // The thread of the chunk being evaluated, as its pacing sees it: its kernel id and the clock of
  // its CPU time while it runs (the timer on the loop reads the one and moves it by the other, and
  // must not once the thread has ended).
  struct EvalThread {
    std::mutex mu;
    pid_t tid = 0;              // set by the thread as it starts
    clockid_t cpu_clock{};      // likewise
    bool has_clock = false;
    bool ended = false;         // set by the thread as it ends
    void started();
    void pace(bool idle);
    int64_t cpu_ms();
  };

  struct Session {
    uint64_t id = 0;
    std::string rid;
    int fd = -1;
    Role role = Role::observe;
    std::string user;
    std::unique_ptr<lua::Sandbox> sandbox;
    std::string output;  // print() of the chunk being evaluated
    int64_t last_used_ns = 0;
    std::thread evaluation;  // the chunk being evaluated (joinable while busy)
    std::shared_ptr<EvalThread> running;   // that thread, while busy
    std::unique_ptr<mesh::Timer> pacing;   // moves a computing chunk into idle time, and back at its budget
    bool busy = false;
    bool closing = false;    // the client went away mid-chunk: drop the session when it ends
  };
  using Sessions = std::map<std::string, std::unique_ptr<Session>>;

  void on_message();
  Session* session_for(const std::string& rid, int fd, const std::string& user, const wire::ReplHello* hello);
  std::string refusal(const std::string& rid, const std::string& user, const wire::ReplHello* hello) const;
  void serve(Session& s, const ReplRequest& req);
  bool make_room();
  void close_session(Sessions::iterator it, const char* why);
  void eval(Session& s, const wire::ReplEval& req);
  void pace(Session& s);
  void evaluated(uint64_t session_id, wire::ReplResult res, const std::string& chunk);
  void complete(Session& s, const wire::ReplComplete& req);
  void audit(const Session& s, const std::string& chunk, const std::string& outcome);
  void audit_line(const std::string& line);
  void audit_call(lua_State* L, const lua::ApiEntry& e);
  template <class M>
  void reply(const std::string& rid, const M& msg);

  uv_loop_t* loop_;
  zmq::context_t& ctx_;
  Controller& controller_;
  ReplOptions opts_;
  lua::ApiRegistry registry_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::unique_ptr<ZmqWatcher> watcher_;
  std::unique_ptr<SocketMonitor> monitor_;
  Sessions sessions_;  // by routing id
  uint64_t next_session_ = 1;
  std::mutex audit_mu_;  // evaluation threads audit the calls they make
  FILE* audit_ = nullptr;
  KindLog bad_input_log_;
  LoopCalls calls_;  // the evaluation threads' way to the loop; declared last, closed first
};

// A controller function as the REPL calls it.
using ControllerFn = int (*)(Controller&, lua_State*);

// Where a registered function's body runs: on the controller's loop thread (it reads or changes
// controller state), or on the calling evaluation thread (it takes what it needs from the loop
// itself with run_on_loop() and does long work where it is: policy.decide, policy.diff, sim.run).
enum class Runs { on_loop, here };

// Registers `fn` as module.name with its signature, doc and least role, bound to controller `c`.
void add_controller_fn(lua::ApiRegistry& reg, Controller& c, const char* module, const char* name,
                       const char* signature, const char* doc, Role role, ControllerFn fn,
                       Runs runs = Runs::on_loop);

// Who is calling, for events and logs: "alice (operate, REPL session 3)", or "controller" outside
// a REPL session.
std::string caller(lua_State* L);

// Registers job.* for the controller into `reg` (job_api.cpp).
void register_controller_api(lua::ApiRegistry& reg, Controller& c);
// Registers policy.* and job.plan (policy_api.cpp).
void register_policy_api(lua::ApiRegistry& reg, Controller& c);
// Registers job.metrics, job.loads, job.rebalance and job.training (training_api.cpp).
void register_training_api(lua::ApiRegistry& reg, Controller& c);

}  // namespace sal::console
