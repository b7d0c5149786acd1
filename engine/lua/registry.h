// registry.h — the registration tables of the scripting API. Every function a sandbox can call
// (the REPL's job.*, later policy.*, sim.*, …) is registered once with its module, name,
// signature, one-line doc and the least role allowed to call it. The same table installs the
// functions into a sandbox (as read-only module tables), answers help(), and computes completions,
// so documentation and completion can never drift from what is callable.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "lua/sandbox.h"

namespace sal::lua {

// A registered function receives the Lua stack and returns the number of results, as a
// lua_CFunction does. It may throw std::exception; the message becomes a Lua error.
using ApiFn = std::function<int(lua_State*)>;

struct ApiEntry {
  std::string module;     // "job"
  std::string name;       // "nodes"
  std::string signature;  // "job.nodes() -> {node, ...}"
  std::string doc;        // one or more sentences; the first line is the summary
  Role role = Role::observe;
  ApiFn fn;
  std::string qualified() const { return module.empty() ? name : module + "." + name; }
};

struct ModuleDoc {
  std::string name;
  std::string doc;
};

class ApiRegistry {
 public:
  void add_module(const std::string& name, const std::string& doc);
  void add(ApiEntry entry);

  // Installs every module and function as read-only globals, plus help(). A function the role may
  // not use is a stub that raises "<module.fn> needs role <r>; this session's role is <role>".
  void install(Sandbox& sb, Role role) const;

  // Called before every call of a function that needs more than `observe` (one that acts), with the
  // caller's stack (its arguments): the REPL's audit log of who did what.
  std::function<void(lua_State*, const ApiEntry&)> on_acting_call;

  // help() text: with an empty topic an overview; else a module or "module.fn".
  std::string help(const std::string& topic, Role role) const;

  // Candidates completing the last identifier path of `line` ("job.no" -> "job.nodes("), at most
  // kMaxCompletions of them; a line longer than kMaxCompletionLine gets none (each candidate
  // repeats the line).
  std::vector<std::string> complete(const std::string& line, Role role,
                                    const std::vector<std::string>& globals) const;
  // The word complete() completes: the trailing identifier path of `line` (the prefix of the
  // session globals worth offering: Sandbox::global_names).
  static std::string completion_word(const std::string& line);
  static constexpr size_t kMaxCompletions = 1024;
  static constexpr size_t kMaxCompletionLine = 1024;

  const std::deque<ApiEntry>& entries() const { return entries_; }

 private:
  std::vector<ModuleDoc> modules_;
  std::deque<ApiEntry> entries_;  // stable addresses: installed closures point at entries
};

}  // namespace sal::lua
