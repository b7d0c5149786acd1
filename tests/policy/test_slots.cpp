// test_slots.cpp — hot reload under test: what an operator can throw at a slot (a policy that
// raises, one that proposes nonsense, one that loops forever, one that allocates without bound, a
// file that is not a policy) is refused or rolled back with a clear message, and the previous
// generation keeps deciding.
#include <doctest/doctest.h>

#include "policy/policy_set.h"

using namespace sal;
using namespace sal::policy;

namespace {

AllocationInput input(uint32_t nodes = 4) {
  return {nodes, 4, 4, 2, {{10, 70, 0, 20}}};
}

std::string allocation_policy(const std::string& name, const std::string& decide_body,
                              const std::string& extra = "") {
  return "return { api = 1, kind = 'allocation', name = '" + name + "', doc = 'test policy',\n"
         "  decide = function(ctx)\n" + decide_body + "\n  end,\n" + extra + " }\n";
}

const char* kGood = "local r = {} local left = ctx.nodes * ctx.slots\n"
                    "for e = 1, ctx.experts do r[e] = (e == ctx.experts) and left or 2 left = left - 2 end\n"
                    "return { replicas = { r } }";

std::string decided_by(Slot& s, const Input& in = input()) { return s.decide(in).decided_by; }

}  // namespace

TEST_CASE("a good policy loads as generation 1 and decides") {
  PolicySet set;
  Slot& s = set.slot(Kind::allocation);
  REQUIRE(set.load(Kind::allocation, allocation_policy("good", kGood), "test").ok());
  CHECK(s.live()->number == 1);
  CHECK(s.live()->hash().size() == 16);
  auto d = s.decide(input());
  CHECK(d.decided_by == "good gen 1");
  CHECK(d.problem.empty());
  CHECK(std::get<AllocationProposal>(d.proposal).replicas[0] == std::vector<uint32_t>{2, 2, 2, 10});
}

TEST_CASE("a policy that raises, proposes nonsense, loops or hoards memory is refused by replay") {
  PolicySet set({.budget_ms = 200, .memory_limit = 16u << 20});
  Slot& s = set.slot(Kind::allocation);
  REQUIRE(set.load(Kind::allocation, allocation_policy("good", kGood), "test").ok());
  s.decide(input());  // a recorded input for replay
  struct Case {
    const char* what;
    std::string body;
    const char* expect;
  };
  Case cases[] = {
      {"raises", "error('boom')", "boom"},
      {"invalid", "return { replicas = { { 2, 2, 2, 2 } } }", "must fill the N x c = 4 x 4 = 16 slots"},
      {"below floor", "return { replicas = { { 1, 1, 1, 13 } } }", "layer 1: expert 1 has 1 replicas, below the floor f = 2"},
      {"malformed", "return { replicas = 'many' }", "replicas: expected a list"},
      {"typo", "return { replica = {} }", "unknown field 'replica' (did you mean 'replicas'?)"},
      {"loops", "while true do end", "policy budget exceeded"},
      {"hoards", "local t = {} while true do t[#t + 1] = string.rep('x', 65536) .. #t end", "memory limit of 16 MiB exceeded"},
  };
  for (const auto& c : cases) {
    std::string what = c.what;
    CAPTURE(what);
    auto st = set.load(Kind::allocation, allocation_policy(c.what, c.body), "test");
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message().find("replay of recent decision 1 of") != std::string::npos);
    CHECK(st.error().message().find(c.expect) != std::string::npos);
    CHECK(s.live()->name() == "good");
    CHECK(decided_by(s) == "good gen 1");
  }
}

TEST_CASE("files that are not valid policies are refused at the shape check") {
  PolicySet set;
  auto refuse = [&](const std::string& src, const std::string& expect) {
    auto st = set.load(Kind::allocation, src, "test");
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message().find(expect) != std::string::npos);
  };
  refuse("return 42", "must return the policy module table");
  refuse("return { api = 1, kind = 'placement', name = 'x', doc = 'd', decide = function() end }",
         "kind is 'placement' but this is the allocation slot");
  refuse("return { api = 2, kind = 'allocation', name = 'x', doc = 'd', decide = function() end }", "api must be 1");
  refuse("return { api = 1, kind = 'allocation', name = 'x', doc = 'd' }", "decide must be a function");
  refuse("return { api = 1, kind = 'allocation', name = 'x', doc = 'd', decide = function() end, selftests = 1 }",
         "'selftests' is not part of the policy contract (did you mean 'selftest'?)");
  refuse("return { api = 1, kind = 'allocation', name = 'x', decide = function() end }", "doc:");
  refuse("return os.time()", "unknown global 'os'");
  refuse("x = 1 return {}", "assignment to undeclared global 'x'");
}

TEST_CASE("the selftest runs on load and its failure names the check") {
  PolicySet set;
  auto st = set.load(Kind::allocation,
                     allocation_policy("st", kGood, "selftest = function(t) t.eq({ 1 }, { 2 }, 'lists differ') end,"),
                     "test");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find("expected { 2 }, got { 1 }: lists differ") != std::string::npos);
}

TEST_CASE("failures at decision time fall back to the previous generation, then roll back by themselves") {
  PolicySet set;
  Slot& s = set.slot(Kind::allocation);
  REQUIRE(set.load(Kind::allocation, allocation_policy("good", kGood), "test").ok());
  // No decision recorded yet, so nothing to replay: a policy that fails only on big jobs loads.
  std::string flaky = "if ctx.nodes > 4 then error('too big for me') end\n" + std::string(kGood);
  REQUIRE(set.load(Kind::allocation, allocation_policy("flaky", flaky), "test").ok());
  CHECK(decided_by(s) == "flaky gen 2");
  auto d = s.decide(input(8));
  CHECK(d.decided_by == "good gen 1 (previous)");
  CHECK(d.problem.find("too big for me") != std::string::npos);
  s.decide(input(8));
  CHECK(s.live()->name() == "flaky");
  s.decide(input(8));  // the third failure in a row rolls back
  CHECK(s.live()->name() == "good");
  CHECK(s.previous()->name() == "flaky");
  CHECK(decided_by(s, input(8)) == "good gen 1");
}

TEST_CASE("questions are pure: answers change no replay input, decision, counter, state or rollback") {
  PolicySet set;
  Slot& s = set.slot(Kind::allocation);
  REQUIRE(set.load(Kind::allocation, allocation_policy("good", kGood), "test").ok());
  // Fails on big jobs, and on its third decision: a question that ran on the live state would show.
  std::string flaky = "calls = calls + 1 if calls > 2 then error('third call') end\n"
                      "if ctx.nodes > 4 then error('too big for me') end\n" + std::string(kGood);
  REQUIRE(set.load(Kind::allocation, "local calls = 0\n" + allocation_policy("flaky", flaky), "test").ok());
  CHECK(decided_by(s) == "flaky gen 2");
  auto recent = s.recent_inputs().size();
  auto last = s.last_decision()->decided_by;
  auto stats = s.live()->stats.decisions;
  for (int i = 0; i < 5; ++i) {  // five failures, each of which would count towards a rollback
    auto snap = s.snapshot();
    auto d = answer(snap, input(8));
    CHECK(d.decided_by == "good gen 1 (previous)");
    CHECK(d.problem.find("flaky gen 2: ") != std::string::npos);
    CHECK(d.problem.find("too big for me") != std::string::npos);
    CHECK(answer(snap, input()).decided_by == "flaky gen 2");
    REQUIRE(set.diff(Kind::allocation, "lazarus").ok());
  }
  CHECK(s.live()->name() == "flaky");  // no rollback
  CHECK(s.recent_inputs().size() == recent);
  CHECK(s.last_decision()->decided_by == last);
  CHECK(s.live()->stats.decisions == stats);
  CHECK(s.live()->stats.errors == 0);
  CHECK(s.floor_decisions() == 0);
  CHECK(decided_by(s) == "flaky gen 2");  // its second decision: the questions ran on copies
}

TEST_CASE("a question starts from the state the live generation saved after its latest decision") {
  PolicySet set;
  Slot& s = set.slot(Kind::allocation);
  // Fails on every even call: a copy that did not carry the state, or a question that ran on the
  // live state, would answer differently from what the live generation then does.
  std::string body = "calls = calls + 1 if calls % 2 == 0 then error('even call ' .. calls) end\n" + std::string(kGood);
  std::string src = "local calls = 0\n" + allocation_policy("parity", body,
                                                          "save = function() return { calls = calls } end,\n"
                                                          "restore = function(st) calls = st.calls end,");
  REQUIRE(set.load(Kind::allocation, src, "test").ok());
  CHECK(decided_by(s) == "parity gen 1");  // call 1
  auto d = answer(s.snapshot(), input());   // a copy's call 2
  CHECK(d.decided_by == "floor");
  CHECK(d.problem.find("even call 2") != std::string::npos);
  auto live = s.decide(input());            // the live generation's call 2, as the question said
  CHECK(live.decided_by == "floor");
  CHECK(live.problem.find("even call 2") != std::string::npos);
  CHECK(answer(s.snapshot(), input()).decided_by == "parity gen 1");  // a copy's call 3
}

TEST_CASE("with no healthy generation the C++ floor decides") {
  PolicySet set;
  Slot& s = set.slot(Kind::allocation);
  REQUIRE(set.load(Kind::allocation, allocation_policy("bad", "error('always')"), "test").ok());
  auto d = s.decide(input());
  CHECK(d.decided_by == "floor");
  auto& a = std::get<AllocationProposal>(d.proposal);
  CHECK(a.replicas[0].size() == 4);
  CHECK(s.floor_decisions() == 1);
  PolicySet empty;
  CHECK(decided_by(empty.slot(Kind::allocation)) == "floor");
}

TEST_CASE("rollback swaps the previous generation back, instantly and reversibly") {
  PolicySet set;
  Slot& s = set.slot(Kind::allocation);
  CHECK_FALSE(s.rollback("test").ok());
  REQUIRE(set.load(Kind::allocation, allocation_policy("one", kGood), "test").ok());
  REQUIRE(set.load(Kind::allocation, allocation_policy("two", kGood), "test").ok());
  REQUIRE(s.rollback("test").ok());
  CHECK(s.live()->name() == "one");
  REQUIRE(s.rollback("test").ok());
  CHECK(s.live()->name() == "two");
}

TEST_CASE("save and restore carry plain state into the next generation") {
  PolicySet set;
  std::string counter = "local calls = 0\nreturn { api = 1, kind = 'allocation', name = 'counter', doc = 'd',\n"
                        "  decide = function(ctx) calls = calls + 1\n" + std::string(kGood) + " end,\n"
                        "  save = function() return { calls = calls, note = 'kept' } end,\n"
                        "  restore = function(s) calls = s.calls + 100 end }";
  REQUIRE(set.load(Kind::allocation, counter, "test").ok());
  Slot& s = set.slot(Kind::allocation);
  s.decide(input());
  s.decide(input());
  REQUIRE(set.load(Kind::allocation, counter, "test").ok());  // replays 2 inputs: calls 102 -> 104
  std::string bad_save = "return { api = 1, kind = 'allocation', name = 'leaky', doc = 'd',\n"
                         "  decide = function(ctx) " + std::string(kGood) + " end,\n"
                         "  save = function() return { f = print } end, restore = function(s) end }";
  REQUIRE(set.load(Kind::allocation, bad_save, "test").ok());
  auto st = set.load(Kind::allocation, bad_save, "test");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find("state migration") != std::string::npos);
  CHECK(st.error().message().find("state.f is a function") != std::string::npos);
}

TEST_CASE("diff says what a candidate would decide differently, without loading it") {
  PolicySet set;
  Slot& s = set.slot(Kind::allocation);
  REQUIRE(set.load(Kind::allocation, allocation_policy("good", kGood), "test").ok());
  auto none = set.diff(Kind::allocation, allocation_policy("cand", kGood));
  REQUIRE(none.ok());
  CHECK(none->summary.find("no decision recorded yet") != std::string::npos);
  s.decide(input());
  auto same = set.diff(Kind::allocation, allocation_policy("cand", kGood));
  CHECK(same->summary == "same replica counts");
  auto other = set.diff(Kind::allocation, "lazarus");
  REQUIRE(other.ok());
  CHECK(other->summary.find("expert(s) change replica count") != std::string::npos);
  CHECK(s.live()->name() == "good");
}

TEST_CASE("names resolve to shipped policies and unknown names list what is shipped") {
  PolicySet set;
  CHECK(set.load(Kind::placement, "mro", "test").ok());
  auto st = set.load(Kind::placement, "mrp", "test");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message().find("no placement policy named 'mrp' (shipped: ") != std::string::npos);
  CHECK(st.error().message().find("spread") != std::string::npos);
  // a long name or binary where a name was expected: shown clipped and escaped (a NUL ended the message)
  auto longer = set.load(Kind::placement, std::string(100000, 'x'), "test");
  REQUIRE_FALSE(longer.ok());
  CHECK(longer.error().message().size() < 400);
  CHECK(longer.error().message().find("… (100000 bytes)' (shipped: ") != std::string::npos);
  auto binary = set.load(Kind::placement, std::string("a\0\1b", 4), "test");
  REQUIRE_FALSE(binary.ok());
  CHECK(binary.error().message().find("'a\\x00\\x01b' is neither a policy name, a .lua path, nor Lua source") !=
        std::string::npos);
}

namespace {

// A policy of `kind` whose decide returns `proposal` (Lua) whatever it is asked.
std::string proposing(const std::string& kind, const std::string& proposal) {
  return "return { api = 1, kind = '" + kind + "', name = 'wrong', doc = 'proposes a broken rule',\n"
         "  decide = function(ctx) return " + proposal + " end }\n";
}

HealthInput two_workers() {
  HealthInput in;
  in.min_workers = 2;
  in.workers = {{"1.0", 1, 1, 1, false, 20, 0, 1}, {"2.0", 2, 2, 2, true, 20, 5, 1}};
  return in;
}

CheckpointInput three_operators() {
  CheckpointInput in;
  for (int32_t i = 0; i < 3; ++i) in.operators.push_back({"op" + std::to_string(i), "expert", 0, i, 3, 1, 1});
  return in;
}

}  // namespace

TEST_CASE("a rule's message names layers, experts, nodes, operators, iterations, groups and types 1-based, as the policy wrote them") {
  struct Case {
    Kind kind;
    std::string proposal;
    Input in;
    const char* expect;
  };
  Case cases[] = {
      {Kind::allocation, "{ replicas = { { 1, 1, 1, 13 } } }", input(),
       "layer 1: expert 1 has 1 replicas, below the floor f = 2"},
      {Kind::placement, "{ placement = { { { 1, 1 }, { 2, 2 } } } }",
       PlacementInput{2, 2, 2, 2, {{2, 2}}, {{1, 1}}, {}, {}},
       "layer 1: expert 1 spans 1 node(s) but must span at least min(f, N) = 2 distinct nodes"},
      {Kind::placement, "{ placement = { { { 1, 2 }, { 1 } } } }",
       PlacementInput{2, 2, 2, 1, {{2, 1}}, {{1, 1}}, {}, {}}, "layer 1: node 2 has 1 slots filled, must be 2"},
      {Kind::checkpoint, "{ window = 2, slots = { { 1, 2 }, { 2, 3 } } }", three_operators(),
       "operator 2 is snapshotted twice (iterations 1 and 2)"},
      {Kind::redundancy, "{ r = 1, hosts = { { 1 }, { 2 }, { 3 } }, assignment = { { 1 }, { 1 }, { 3 } } }",
       RedundancyInput{3, {true, true, true}, 1, false, {}}, "group 2 computes shard type 1 which it does not host"},
      {Kind::redundancy,
       "{ r = 1, hosts = { { 1 }, { 2 } }, assignment = { { 1 }, { 2 } }, after_patch = 'later' }",
       RedundancyInput{2, {true, true}, 1, false, {}},
       "after_patch must be \"cheaper\", \"degraded\" or \"regroup\", not \"later\""},
      {Kind::redundancy, "{ r = 1, hosts = { { 1 }, { 2 } }, assignment = { { 1 }, { 2 } }, after_patch = true }",
       RedundancyInput{2, {true, true}, 1, false, {}}, "after_patch must be \"cheaper\", \"degraded\" or \"regroup\", not a boolean"},
      {Kind::redundancy, "{ r = 1, hosts = { { 1 }, { 2 } }, assignment = { { 1 }, { 2 } }, spread = 'yes' }",
       RedundancyInput{2, {true, true}, 1, false, {}}, "spread must be true or false, not a string"},
      // spreading, a type no group up hosts is no wipe-out (it is spread), and losing every group is
      {Kind::redundancy, "{ r = 1, hosts = { { 1 }, { 2 } }, assignment = { { 1 }, { } }, spread = true, wipeout = true }",
       RedundancyInput{2, {true, false}, 1, false, {}},
       "the proposal declares a wipe-out but it spreads and a group is alive"},
      {Kind::redundancy, "{ r = 1, hosts = { { 1 }, { 2 } }, assignment = { { }, { } }, spread = true }",
       RedundancyInput{2, {false, false}, 1, false, {}}, "no group is alive, but the proposal does not declare a wipe-out"},
      {Kind::health, "{ shares = { 1, 0 } }", two_workers(), "shares[2] is 0: a share lies in [0.05, 1]"},
      {Kind::health, "{ shares = { 1 } }", two_workers(), "shares has 1 entries for 2 workers"},
      {Kind::health, "{ shares = { 1, 1 }, drain = { 2 } }", two_workers(),
       "draining would leave 1 workers; the job needs at least 2"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.proposal);
    PolicySet set;
    REQUIRE(set.load(c.kind, proposing(std::string(kind_name(c.kind)), c.proposal), "test").ok());
    auto d = set.slot(c.kind).decide(c.in);
    CHECK(d.decided_by == "floor");
    CHECK(d.problem.find(c.expect) != std::string::npos);
  }
}
