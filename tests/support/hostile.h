// hostile.h — a seeded, grammar-based generator of hostile input for a live controller (issue 34):
// REPL lines, policy sources and drill scripts built by combining the known escapes — metatables
// on results and proposals (a looping or raising __index, __tostring, __eq, __concat), deep and
// shared nesting, huge strings and tables, long pattern sets and exponential patterns, C-call
// chains (gsub with a function, sort with a comparator, unpack), coroutine tricks (a loop inside a
// coroutine, resumed, wrapped, yielding across pcall), errors inside metamethods and error
// handlers, runaway loops and recursion, memory hogs, and results that are functions, threads and
// cycles.
//
// Each input carries what it may end with, worked out from its parts as it is built: a statement
// that may raise contributes its errors if every statement before it may complete; the values
// returned contribute theirs, and then what converting them may raise (a result past the REPL's
// limit). So a run can check that every input ended either normally (when it may) or with one of
// the errors its parts name — the budget, the memory cap, the result limit, a rule of the
// proposal, or an error the input raised on purpose (they all say "hostile:") — and nothing else.
// The same seed gives the same inputs.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sal::test {

enum class HostileKind { repl, policy, drill };
const char* hostile_kind_name(HostileKind k);

struct HostileInput {
  HostileKind kind = HostileKind::repl;
  std::string text;                 // the chunk, the policy's source, or the drill script
  std::string slot;                 // policy: the slot it is loaded into
  std::string shape;                // what it is made of, for a failure message
  std::vector<std::string> errors;  // an error must contain one of these
  bool may_succeed = false;         // whether it may end without an error
  bool json = false;                // repl: ask for the result as JSON

  // Whether `error` contains one of the errors the input may end with.
  bool expects(const std::string& error) const;
};

// What the inputs may use and how the budgets they meet are named.
struct HostileOptions {
  std::string repl_budget = "repl.budget_ms";
  std::string policy_budget = "policy budget";
  std::string drill_budget = "drill script budget";
  bool controller_api = true;   // REPL lines may call job.*, policy.* (false: a bare session)
  int repl_share = 70;          // percent of inputs that are REPL lines,
  int policy_share = 20;        // policy sources; the rest are drill scripts
};

class HostileGenerator {
 public:
  explicit HostileGenerator(uint64_t seed, HostileOptions opts = {});
  HostileInput next();

  // A piece of Lua and what running it may end with.
  struct Piece {
    std::string code;
    std::vector<std::string> errors;  // what it may raise
    bool may_pass = true;             // whether it may complete
  };
  // A value expression, and what converting it costs: values walked and bytes of text.
  struct Value {
    Piece piece;
    double values = 1;     // values a conversion walks
    double bytes = 8;      // bytes of its text
    double lua_bytes = 64; // what it holds in Lua
  };

 private:
  HostileInput repl_input();
  HostileInput policy_input();
  HostileInput drill_input();

  Piece statement(const std::string& budget, bool cheap_loops);
  Value value(int depth);
  Value container(int depth);
  Piece returned(const std::vector<Value>& values) const;
  Piece loop(const std::string& budget);
  Piece coroutine_trick(const std::string& budget);
  Piece metamethod_trap(const std::string& budget);
  Piece c_call_chain(const std::string& budget);
  Piece memory_hog();
  Piece error_value(const std::string& budget);
  Piece api_call();
  Piece library_call();
  std::string metatable();
  Piece proposal_trap(const std::string& budget);
  Piece module_table(const std::string& slot, const std::string& budget, std::vector<std::string>& definite);

  int pick(int n) { return int(rng_() % uint64_t(n)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::mt19937_64 rng_;
  HostileOptions opts_;
  HostileKind context_ = HostileKind::repl;  // what is being built: REPL lines see the controller's
                                            // API, policies the algorithm library (sal.*)
};

}  // namespace sal::test
