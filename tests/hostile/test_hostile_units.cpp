// test_hostile_units.cpp — the hostile-input generator's inputs (support/hostile.h) through the
// controller's own code paths, without a mesh: REPL lines through a session's evaluation
// (console::evaluate, the chunk and the conversion of its result in one budgeted call), policy
// sources through a policy set's load (shape, selftest, replay of a recorded decision), drill
// scripts through the drill reader. Each input must end within its budget (plus a margin for a
// loaded machine), normally only if it may, and otherwise with one of the errors its parts name. t0740 runs the same inputs
// against a live job; this runs many more of them in seconds.
#include <doctest/doctest.h>

#include <cstdlib>

#include "core/clock.h"
#include "drill/drill_spec.h"
#include "console/repl_eval.h"
#include "policy/policy_set.h"
#include "support/hostile.h"

using namespace sal;
using namespace sal::test;

namespace hostile_units {  // named: the test program is built as one unity file

constexpr int64_t kReplBudgetMs = 60;
constexpr int64_t kPolicyBudgetMs = 40;
constexpr size_t kMemory = 32u << 20;
// Past its budget an input may take this long to end here: the 100 ms, with room for a
// loaded CI machine (t0740 holds the live controller to the 100 ms).
constexpr double kMarginMs = 250;

// How many inputs of each kind a run tries: SAL_HOSTILE_UNIT_INPUTS, or `fallback`.
int inputs(int fallback) {
  const char* e = std::getenv("SAL_HOSTILE_UNIT_INPUTS");
  return e ? std::atoi(e) : fallback;
}

// Checks one input's outcome; returns whether it failed (to count).
bool check_outcome(const HostileInput& in, bool ok, const std::string& error, double ms, double bound_ms) {
  CAPTURE(in.text);
  CAPTURE(in.shape);
  CAPTURE(error);
  CHECK(ms < bound_ms + kMarginMs);
  if (ok) {
    CHECK(in.may_succeed);
    return false;
  }
  CHECK(in.expects(error));
  return true;
}

HostileGenerator generator(uint64_t seed, int repl, int policy) {
  HostileOptions o;
  o.controller_api = false;
  o.repl_share = repl;
  o.policy_share = policy;
  return HostileGenerator(seed, o);
}

}  // namespace hostile_units

using namespace hostile_units;

TEST_CASE("hostile REPL lines end within the session's budget with an error they name") {
  auto gen = generator(3401, 100, 0);
  lua::Sandbox sb({.name = "hostile session", .memory_limit = kMemory});
  std::string output;
  lua::Budget budget{.deadline_ms = kReplBudgetMs, .what = "repl.budget_ms (60 ms)"};
  int failed = 0, n = inputs(300);
  for (int i = 0; i < n; ++i) {
    HostileInput in = gen.next();
    wire::ReplEval req;
    req.id = uint64_t(i);
    req.chunk = in.text;
    req.format = in.json ? wire::ValueFormat::json : wire::ValueFormat::text;
    int64_t t0 = mono_ns();
    auto r = console::evaluate(sb, output, req, budget);
    failed += check_outcome(in, r.ok, r.error, double(mono_ns() - t0) / 1e6, kReplBudgetMs);
    CHECK(r.value.size() <= (1u << 20));
    CHECK(lua_gettop(sb.L()) == 0);
  }
  MESSAGE(n << " REPL lines, " << failed << " ended with an error");
  auto after = console::evaluate(sb, output, {.id = 0, .chunk = "return 6 * 7"}, budget);
  CHECK(after.value == "42");
}

TEST_CASE("hostile policies are refused within their budgets, naming the rule or the limit") {
  auto gen = generator(3402, 0, 100);
  policy::PolicySet set({.budget_ms = kPolicyBudgetMs, .memory_limit = kMemory});
  // A recorded decision in the allocation slot: its candidates are replayed on it.
  set.slot(policy::Kind::allocation).decide(policy::AllocationInput{4, 4, 4, 2, {{10, 70, 0, 20}}});
  int n = inputs(200);
  for (int i = 0; i < n; ++i) {
    HostileInput in = gen.next();
    policy::Kind kind;
    REQUIRE(policy::parse_kind(in.slot, kind));
    int64_t t0 = mono_ns();
    auto s = set.load(kind, in.text, "hostile");
    // load, selftest, one replay and a migration: each its own budget
    check_outcome(in, s.ok(), s.ok() ? "" : s.error().message(), double(mono_ns() - t0) / 1e6, 4 * kPolicyBudgetMs);
  }
}

TEST_CASE("hostile drill scripts end within the drill budget, and no drill is accepted") {
  auto gen = generator(3403, 0, 0);
  int n = inputs(40);
  for (int i = 0; i < n; ++i) {
    HostileInput in = gen.next();
    int64_t t0 = mono_ns();
    auto d = drill::parse_drill(in.text, "hostile.lua", {});
    check_outcome(in, d.ok(), d.ok() ? "" : d.error().message(), double(mono_ns() - t0) / 1e6, 2000);
  }
}
