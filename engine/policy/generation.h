// generation.h — one loaded generation of a Lua policy: its own sandboxed state (text only, no
// io/os/ffi/debug/jit, strict globals, JIT off, budget and memory cap), the module table it
// returned, and what it has done (decisions, errors, rejections, decision times). Generations are
// immutable once loaded; a new version of a policy is a new generation (slot.h swaps them).
//
// The module contract (docs/policies.md):
//   return { api = 1, kind = "placement", name = "mro", doc = "...",
//            decide = function(ctx) ... return proposal end,
//            selftest = function(t) ... end,            -- optional
//            save = function() ... end, restore = function(state) ... end }   -- optional
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/result.h"
#include "lua/sandbox.h"
#include "policy/decision.h"

namespace sal::policy {

struct Source {
  std::string text;
  // A file path, "embedded:placement/mro", "repl" (text given in a chunk), or the name a client
  // gave the text it read (its file's): the chunk name, so errors say `origin:line`.
  std::string origin;
  bool given = false;  // the text was handed in (a REPL chunk, a client's file): a reload keeps it
};

struct GenerationEnv {
  int64_t budget_ms = 500;               // per call into the policy (decide, selftest, save, ...)
  size_t memory_limit = 64u << 20;
  // Text of policies/lib/<name>.lua for `require "name"`; empty function: no require.
  std::function<Result<Source>(const std::string& name)> load_lib;
  // Installs the algorithm library (sal.*) into a fresh state.
  std::function<void(lua::Sandbox&)> install_library;
  // Called every few ms while policy code runs (the controller keeps serving its mesh); may be empty.
  std::function<void()> service;
};

struct GenerationStats {
  uint64_t decisions = 0;
  uint64_t errors = 0;       // raised, timed out, ran out of memory, or returned a malformed proposal
  uint64_t rejections = 0;   // well-formed proposals the validators refused
  std::deque<double> ms;     // the last decision times
  std::string last_problem;
  double percentile(double p) const;
};

class Generation {
 public:
  static Result<std::unique_ptr<Generation>> load(Kind kind, const Source& src, const GenerationEnv& env);

  Kind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const std::string& doc() const { return doc_; }
  const std::string& hash() const { return hash_; }
  const Source& source() const { return source_; }
  int64_t loaded_wall_ms() const { return loaded_wall_ms_; }
  uint64_t number = 0;  // the slot's generation counter at load
  GenerationStats stats;
  // "mro gen 3"
  std::string label() const { return name_ + " gen " + std::to_string(number); }

  // Runs decide(ctx) and reads the proposal back (shape only; the caller validates).
  Result<Proposal> decide(const Input& in);
  // Runs selftest(t) if the policy has one.
  Status selftest();
  bool has_selftest() const { return has_selftest_; }
  bool has_restore() const { return has_restore_; }

  // Questions (slot.h) run on copies of a generation, built off the controller's loop, without
  // calling into this one, and a new generation takes over its state the same way: after each of
  // its decisions (and its load) the slot keeps what save() returns, in a small state of its own.
  // keep_state() runs save() now (a no-op without one; a failing save() keeps nothing, and
  // kept_problem() says why); kept_state() copies what is kept into a new holder (null if nothing
  // is), and restore_kept() hands such a holder's value to this generation's restore() (a no-op
  // without one). save() runs, and each copy is made, inside a budgeted call (lua/sandbox.h).
  void keep_state();
  std::unique_ptr<lua::Sandbox> kept_state() const;
  const std::string& kept_problem() const { return kept_problem_; }
  Status restore_kept(lua::Sandbox& holder);

  void record(double ms, bool error, bool rejected, const std::string& problem);
  // What runs every few ms while this generation's code does (a generation prepared off the
  // controller's loop gets the loop's when it is installed there).
  void set_service(std::function<void()> service) { env_.service = std::move(service); }

 private:
  Generation(Kind kind, Source src, const GenerationEnv& env);
  Status run_chunk();
  Status check_shape();
  void push_method(lua_State* L, const char* method) const;
  Status run_method(const char* method, int nresults, const lua::Sandbox::Work& work);
  Status save_onto_stack();
  lua::Budget budget() const;

  Kind kind_;
  Source source_;
  GenerationEnv env_;
  std::unique_ptr<lua::Sandbox> sandbox_;
  int module_ref_ = -2;  // LUA_NOREF
  std::string name_, doc_, hash_;
  bool has_selftest_ = false, has_save_ = false, has_restore_ = false;
  std::unique_ptr<lua::Sandbox> kept_;  // what save() returned last, at the holder's stack index 1
  std::string kept_problem_;            // why the last save() kept nothing
  int64_t loaded_wall_ms_ = 0;
};

// 64-bit FNV-1a of the text, as 16 hex digits: a policy's source hash.
std::string source_hash(const std::string& text);

}  // namespace sal::policy
