// sandbox.h — the LuaJIT host: one sandboxed lua_State for a job file, a policy generation or a
// REPL session.
//
// A Sandbox is text-only (bytecode is refused), has no io/os/ffi/debug/jit/require, keeps the JIT
// off (LuaJIT's count hooks do not fire inside compiled traces), caps its memory with its own
// allocator, optionally makes unknown globals an error, and runs code under a Budget: an
// instruction-count hook that checks a wall-clock deadline, re-arms itself on every instruction
// once expired (so `pcall` cannot swallow the stop), and can call a service function every few ms
// so the host's event loop keeps breathing while a chunk runs. The library functions that can run
// long inside one C call (pattern matching, sort) are replaced by versions that poll the same
// budget (strlib.h), so no single call outlives it either.
#pragma once

#include <lua.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::lua {

struct SandboxOptions {
  std::string name = "lua";              // shows up in errors: "<name>: memory limit ..."
  size_t memory_limit = 64u << 20;       // bytes the state may hold
  bool strict_reads = true;              // reading an undefined global is an error
  bool strict_writes = false;            // creating a new global is an error
  std::function<void(const std::string&)> print;  // where print() goes (default: the log)
};

struct Budget {
  int64_t deadline_ms = 1000;            // wall-clock limit for one call
  int64_t service_every_ms = 10;         // how often `service` runs while the chunk runs
  std::function<void()> service;         // must not throw; may be empty
  std::string what = "budget";           // "repl.budget_ms" — named in the timeout error
};

class Sandbox {
 public:
  explicit Sandbox(SandboxOptions opts);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  lua_State* L() const { return L_; }
  const SandboxOptions& options() const { return opts_; }

  // Loads text (never bytecode) as a function on the stack top; the chunk name appears in errors.
  Status load(const std::string& text, const std::string& chunk_name);

  // lua_pcall under the budget with a traceback handler; nresults may be LUA_MULTRET. On error the
  // stack is restored to its height before the function and its arguments, and the error says
  // whether it was the budget, memory, or a Lua error (with the position and a short traceback).
  Status call(int nargs, int nresults, const Budget& budget);

  // Host work that touches Lua values: runs `work` inside a protected call under the budget, with
  // the top `nargs` values of the stack as its arguments (at 1..nargs of its own stack). Whatever
  // it does there — pushing a ctx (the memory cap raises a clean error), calling Lua functions
  // (the hook stops them), reading results and converting them (conversions poll the budget) —
  // ends within the budget, and nothing it raises escapes unprotected. Its Status is returned as
  // is; a Lua error raised inside it comes back as call()'s would. On success the top `nresults`
  // values it leaves (LUA_MULTRET: all) replace the arguments on the caller's stack; on error the
  // stack is back to its height before the arguments.
  using Work = std::function<Status(lua_State*)>;
  Status run(int nargs, int nresults, const Budget& budget, const Work& work);

  // Names of the globals currently defined that start with `prefix` (for completion), at most
  // `max` of them (a session may hold a million), none longer than a name anyone types.
  std::vector<std::string> global_names(const std::string& prefix = "", size_t max = SIZE_MAX) const;

  // Sets global `name` to the value on top of the stack (popped), bypassing strict mode: this is
  // how the host installs its API.
  void set_global(const char* name);

  // Declares a global that strict mode must accept even though its value is nil.
  void allow_global(const std::string& name);

  // Who runs code in this state ("alice (operate, REPL session 3)"), for the host's API functions to
  // name in events and the audit log; empty unless set.
  void set_identity(std::string who);
  static const std::string& identity(lua_State* L);
  // The directory relative paths named by this state's code mean (a local REPL client's working
  // directory: it reads its own files); empty unless set — the process's own.
  void set_working_dir(std::string dir);
  static const std::string& working_dir(lua_State* L);

  size_t memory_used() const;
  // The memory cap of the state behind L (SIZE_MAX for a state a Sandbox did not make), and what of
  // it is not in use: conversions out of the state are bounded by them (lua/meter.h).
  static size_t memory_cap(lua_State* L);
  static size_t memory_left(lua_State* L);
  // True while a call is running (the REPL uses it to refuse re-entrant evaluation).
  bool busy() const;

  // Makes the table at the top of the stack read-only for sandboxed code: replaces it by a proxy
  // whose reads go to the original, whose writes raise "<label> is read-only", and whose
  // metatable cannot be read or replaced.
  static void make_readonly(lua_State* L, const std::string& label);

  struct Core;  // allocator + budget state, shared with the C hooks (sandbox.cpp)

 private:
  void install_globals();
  void install_host_functions();
  Status guarded(int base, int nargs, int nresults, const Budget& budget);

  SandboxOptions opts_;
  std::unique_ptr<Core> core_;
  lua_State* L_ = nullptr;
};

// For C functions that work long without running a VM instruction (strlib.cpp's matcher and
// sort): true while the running call is within its budget (its service function runs when due);
// false once the deadline has passed — the function then stops and calls budget_raise(L), which
// raises the same error the instruction hook would. Outside a budgeted call: always true.
bool budget_poll(lua_State* L);
int budget_raise(lua_State* L);
// The message budget_raise() raises ("repl.budget_ms (1000 ms) exceeded: stopped after 1000 ms"),
// for host code that stops with an error value instead (lua/meter.h).
std::string budget_message(lua_State* L);

}  // namespace sal::lua
