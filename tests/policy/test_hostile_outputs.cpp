// test_hostile_outputs.cpp — what a policy hands back to C++ crosses inside its budget (issue 34).
// Proposals, module tables, selftest values and save() states are read raw or inside the policy's
// budgeted call: a metatable whose __index loops or raises, a proposal of shared tables that is
// millions of values once walked, a save() state too large to copy, a state filled to its memory
// cap before the host pushes a ctx, a library call handed the wrong types — each ends within the
// budget with an error naming the rule or limit, and the slot's previous generation decides on.
#include <doctest/doctest.h>

#include "core/clock.h"
#include "policy/generation.h"
#include "policy/library.h"
#include "policy/policy_set.h"

using namespace sal;
using namespace sal::policy;

namespace hostile_outputs {  // named: the test program is built as one unity file

constexpr int64_t kBudgetMs = 300;

AllocationInput hostile_input() { return {4, 4, 4, 2, {{10, 70, 0, 20}}}; }

std::string hostile_policy(const std::string& decide_body, const std::string& extra = "") {
  return "return { api = 1, kind = 'allocation', name = 'hostile', doc = 'test policy',\n"
         "  decide = function(ctx)\n" + decide_body + "\n  end,\n" + extra + " }\n";
}

const char* kReplicas = "{ { 2, 2, 2, 10 } }";

// Loads `source` straight into a generation (no replay) and runs one decision, timing it.
struct Outcome {
  Result<Proposal> proposal = Error("not run");
  double ms = 0;
};

Outcome decide_once(const std::string& source, size_t memory = 16u << 20) {
  GenerationEnv env{.budget_ms = kBudgetMs, .memory_limit = memory, .install_library = install_library};
  auto g = Generation::load(Kind::allocation, {source, "test"}, env);
  REQUIRE_MESSAGE(g.ok(), g.error().message());
  Outcome o;
  int64_t t0 = mono_ns();
  o.proposal = (*g)->decide(hostile_input());
  o.ms = double(mono_ns() - t0) / 1e6;
  return o;
}

void check_refused(const std::string& what, const std::string& decide_body, const std::string& expect) {
  CAPTURE(what);
  auto o = decide_once(hostile_policy(decide_body));
  REQUIRE_FALSE(o.proposal.ok());
  CAPTURE(o.proposal.error().message());
  CHECK(o.proposal.error().message().find(expect) != std::string::npos);
  CHECK(o.ms < kBudgetMs + 100);
}

}  // namespace hostile_outputs

using namespace hostile_outputs;

TEST_CASE("a proposal with a metatable is refused without running it, whatever its metamethods do") {
  const std::string table_trap = "local p = { replicas = " + std::string(kReplicas) + " }\n";
  const std::string refused = "allocation proposal: a table with a metatable";
  check_refused("__index loops", table_trap + "return setmetatable(p, { __index = function() while true do end end })",
                refused);
  check_refused("__index raises", table_trap + "return setmetatable(p, { __index = function() error('boom') end })",
                refused);
  check_refused("__index is a table of traps",
                table_trap + "return setmetatable(p, { __index = setmetatable({}, { __index = function() while true do end end }) })",
                refused);
  check_refused("a nested list has one",
                "return { replicas = { setmetatable({ 2, 2, 2, 10 }, { __index = function() while true do end end }) } }",
                "replicas[1]: a table with a metatable");
  // The policy as written: the controller's loop was pinned by it.
  check_refused("the issue's policy",
                "return setmetatable({ replicas = " + std::string(kReplicas) +
                    " }, { __index = function() while true do end end })",
                "malformed proposal");
}

TEST_CASE("a proposal of shared tables stops at the memory cap's value count, not at the host's memory") {
  // 2000 references to one 100 000-entry list: 200 M values once walked, 2 MB in Lua.
  const std::string shared = "local t = {} for i = 1, 1e5 do t[i] = 2 end\n"
                             "local layers = {} for l = 1, 2000 do layers[l] = t end\n"
                             "return { replicas = layers }";
  auto o = decide_once(hostile_policy(shared));
  REQUIRE_FALSE(o.proposal.ok());
  CAPTURE(o.proposal.error().message());
  CHECK(o.proposal.error().message().find("more than 1048576 values (the memory cap of 16 MiB allows no more)") !=
        std::string::npos);
  CHECK(o.ms < kBudgetMs + 100);
}

TEST_CASE("a module table with a metatable, or a module of megabytes, is refused or cut at load") {
  PolicySet set;
  auto st = set.load(Kind::allocation,
                     "return setmetatable({ api = 1, kind = 'allocation', name = 'm', doc = 'd' },"
                     " { __index = function(t, k) while true do end end })",
                     "test");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find("the module table has a metatable") != std::string::npos);
  // A doc of 10 MB is kept as its first thousand characters: it is a line in listings and events.
  REQUIRE(set.load(Kind::allocation,
                   "local d = ('x'):rep(1e7) return { api = 1, kind = 'allocation', name = 'big', doc = d,"
                   " decide = function(ctx) return { replicas = " + std::string(kReplicas) + " } end }",
                   "test")
              .ok());
  CHECK(set.slot(Kind::allocation).live()->doc().size() < 1010);
}

TEST_CASE("t.eq on a shared nesting stops at its limit, and t.valid reads raw") {
  PolicySet set({.budget_ms = kBudgetMs});
  const std::string shared = "local x = {} for i = 1, 64 do x[i] = i end "
                             "for d = 1, 4 do local u = {} for i = 1, 64 do u[i] = x end x = u end ";
  int64_t t0 = mono_ns();
  auto st = set.load(Kind::allocation,
                     hostile_policy("return { replicas = " + std::string(kReplicas) + " }",
                                       "selftest = function(t) " + shared + " t.eq(x, x) end,"),
                     "test");
  REQUIRE_FALSE(st.ok());
  CHECK(double(mono_ns() - t0) / 1e6 < kBudgetMs + 100);
  // 16.7 M comparisons: stopped by the count or by the budget, whichever comes first here
  CHECK(st.error().message().find("t.eq: ") != std::string::npos);
  CHECK((st.error().message().find("more than") != std::string::npos ||
         st.error().message().find("policy budget exceeded") != std::string::npos));
  auto valid = set.load(
      Kind::allocation,
      hostile_policy("return { replicas = " + std::string(kReplicas) + " }",
                        "selftest = function(t) t.valid(setmetatable({}, { __index = function() while true do end end }),"
                        " { nodes = 4, slots = 4, experts = 4, min_replicas = 2, loads = { { 1, 1, 1, 1 } } }) end,"),
      "test");
  REQUIRE_FALSE(valid.ok());
  CHECK(valid.error().message().find("t.valid: malformed proposal: allocation proposal: a table with a metatable") !=
        std::string::npos);
}

TEST_CASE("a save() state too large to copy is refused with its limit, inside the budget") {
  PolicySet set({.budget_ms = kBudgetMs});
  const std::string hoard = "local function decide(ctx) return { replicas = " + std::string(kReplicas) + " } end\n"
                            "local t = {} for i = 1, 64 do t[i] = i end\n"
                            "for d = 1, 4 do local u = {} for i = 1, 64 do u[i] = t end t = u end\n"
                            "return { api = 1, kind = 'allocation', name = 'hoard', doc = 'd', decide = decide,\n"
                            "  save = function() return t end, restore = function(s) end }";
  REQUIRE(set.load(Kind::allocation, hoard, "test").ok());
  set.slot(Kind::allocation).decide(hostile_input());
  int64_t t0 = mono_ns();
  auto st = set.load(Kind::allocation, hoard, "test");
  REQUIRE_FALSE(st.ok());
  CHECK(double(mono_ns() - t0) / 1e6 < 4 * (kBudgetMs + 100));  // load, replay, migration: each its own budget
  // 16.7 M values: stopped by the count, or by the budget on a loaded machine
  CHECK(st.error().message().find("state migration: save() returned ") != std::string::npos);
  CHECK((st.error().message().find("the saved state: more than 1048576 values") != std::string::npos ||
         st.error().message().find("policy budget exceeded") != std::string::npos));
  CHECK(set.slot(Kind::allocation).decide(hostile_input()).decided_by == "hoard gen 1");
}

TEST_CASE("a policy whose state is full before its ctx is pushed gets a memory error, not a crash") {
  const std::string fill = "local keep = {}\n"
                           "local function decide(ctx)\n"
                           "  pcall(function() while true do keep[#keep + 1] = ('x'):rep(4096) .. #keep end end)\n"
                           "  return { replicas = " + std::string(kReplicas) + " }\n"
                           "end\n"
                           "return { api = 1, kind = 'allocation', name = 'full', doc = 'd', decide = decide }";
  GenerationEnv env{.budget_ms = kBudgetMs, .memory_limit = 8u << 20};
  auto g = Generation::load(Kind::allocation, {fill, "test"}, env);
  REQUIRE(g.ok());
  for (int i = 0; i < 3; ++i) {  // the first fills the state; the next find it full when the ctx is pushed
    auto p = (*g)->decide(hostile_input());
    if (!p) CHECK(p.error().message().find("memory limit of 8 MiB exceeded") != std::string::npos);
  }
}

TEST_CASE("the algorithm library refuses arguments of the wrong shape or size with an error, never a crash") {
  for (const char* call : {"sal.recovery(5, 1)", "sal.recovery({5}, 1)", "sal.recovery({{5}, 7}, 1)",
                           "sal.min_cost_flow(2, {5}, 1, 2)", "sal.matching(2, 2, {5, 6})",
                           "sal.spare_reorder({5}, {true})", "sal.placement_imbalance({7}, {1})",
                           "sal.moves({7}, {1})", "sal.moves({{{1}}}, {{{1}, {2}}})",
                           "sal.moves({{{1}}}, {{{4e9}}})"}) {
    CAPTURE(call);
    auto o = decide_once(hostile_policy(std::string(call) + " return { replicas = " + kReplicas + " }"));
    if (!o.proposal.ok()) CHECK(o.proposal.error().message().find("sal.") != std::string::npos);
  }
  // Sizes the C++ side would allocate by, past what the policy's memory cap allows.
  for (const char* call : {"sal.recovery_curve({ { 1 } }, 2e9)", "sal.spare_layout(4e6, 4e6)", "sal.golomb(2e9, 3)",
                           "sal.min_cost_flow(4e9, {}, 1, 2)", "sal.matching(2e9, 2e9, {})"}) {
    CAPTURE(call);
    auto o = decide_once(hostile_policy(std::string(call) + " return { replicas = " + kReplicas + " }"));
    REQUIRE_FALSE(o.proposal.ok());
    CHECK(o.proposal.error().message().find("asks for more than the policy's memory cap allows") != std::string::npos);
    CHECK(o.ms < kBudgetMs + 100);
  }
}

TEST_CASE("a ctx whose sizes describe a plan past the memory cap is refused before C++ builds it") {
  PolicySet set({.budget_ms = kBudgetMs, .memory_limit = 16u << 20});
  auto st = set.load(Kind::placement,
                     "return { api = 1, kind = 'placement', name = 'p', doc = 'd', decide = function(ctx) end,"
                     " selftest = function(t) t.valid({ placement = {} }, { nodes = 16000000, slots = 16000000,"
                     " experts = 1, floor = 1, replicas = { { 1 } } }) end }",
                     "test");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find("bad ctx") != std::string::npos);
  CHECK(st.error().message().find("more than 1048576 values") != std::string::npos);
}
