// hostile.cpp — see hostile.h. Every piece is Lua text plus what running it may end with; the
// grammar below combines pieces and their outcomes. Sizes are chosen on both sides of the limits
// (the REPL's result limit of 262144 values and 1 MiB of text, a session's memory cap of a few
// tens of MiB), and a size near a limit is allowed either outcome. Any input may meet its budget
// (a loaded machine runs the same Lua slower), so the budget's error is always allowed; what the
// run checks is that nothing else than the limits and the input's own errors ever comes back.
#include "support/hostile.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace sal::test {
namespace {

using Piece = HostileGenerator::Piece;
using Value = HostileGenerator::Value;

// Errors the pieces name, besides a budget's (which depends on the input's kind).
const std::string kMemory = "memory limit of";
const std::string kResultLimit = "the REPL's result limit";
const std::string kResultMemory = "repl.memory_mb";
const std::string kStack = "stack overflow";
const std::string kHostile = "hostile:";
const std::string kErrorObject = "error object is a";
const std::string kErrorInError = "error in error handling";
const std::string kMetatable = "a table with a metatable";

// The REPL's result limits (console/repl_eval.cpp), and the band around them where either outcome
// is allowed: the generator's estimates of a value's size are close, not exact.
constexpr double kResultValues = 262144;
constexpr double kResultBytes = 1 << 20;
constexpr double kBandLow = 0.5, kBandHigh = 2.0;
// What a session holds before its memory cap may refuse it (a session cap of 32 MiB or more).
constexpr double kSafeLuaBytes = 12u << 20;

void add(std::vector<std::string>& to, const std::vector<std::string>& from) {
  for (const auto& e : from)
    if (std::find(to.begin(), to.end(), e) == to.end()) to.push_back(e);
}

// Pieces run one after another: a piece's errors count if every piece before it may complete.
Piece sequence(const std::vector<Piece>& pieces, const std::string& separator) {
  Piece out;
  for (const auto& p : pieces) {
    if (!out.code.empty()) out.code += separator;
    out.code += p.code;
    if (out.may_pass) add(out.errors, p.errors);
    out.may_pass = out.may_pass && p.may_pass;
  }
  return out;
}

Piece fails(std::string code, std::vector<std::string> errors) { return {std::move(code), std::move(errors), false}; }
Piece passes(std::string code) { return {std::move(code), {}, true}; }
Value small(std::string code) { return {passes(std::move(code)), 1, 16, 64}; }

template <class T, size_t N>
const T& one_of(std::mt19937_64& rng, const T (&options)[N]) {
  return options[rng() % N];
}

}  // namespace

const char* hostile_kind_name(HostileKind k) {
  switch (k) {
    case HostileKind::repl: return "repl";
    case HostileKind::policy: return "policy";
    case HostileKind::drill: return "drill";
  }
  return "?";
}

bool HostileInput::expects(const std::string& error) const {
  return std::any_of(errors.begin(), errors.end(), [&](const std::string& e) { return error.find(e) != std::string::npos; });
}

HostileGenerator::HostileGenerator(uint64_t seed, HostileOptions opts) : rng_(seed), opts_(std::move(opts)) {}

HostileInput HostileGenerator::next() {
  int r = pick(100);
  context_ = r < opts_.repl_share                       ? HostileKind::repl
             : r < opts_.repl_share + opts_.policy_share ? HostileKind::policy
                                                         : HostileKind::drill;
  switch (context_) {
    case HostileKind::repl: return repl_input();
    case HostileKind::policy: return policy_input();
    case HostileKind::drill: return drill_input();
  }
  return repl_input();
}

// ---- statements ----

HostileGenerator::Piece HostileGenerator::loop(const std::string& budget) {
  static const char* loops[] = {
      "while true do end",
      "repeat until false",
      "for i = 1, math.huge do end",
      "local function f() return f() end f()",
      "while true do pcall(function() while true do end end) end",
      "while true do pcall(error, 'hostile: swallowed') end",

      "local t = setmetatable({}, { __index = function(t, k) return t[k + 1] end }) local _ = t[1]",
  };
  if (chance(0.1))  // a handler that never returns: stopped, and xpcall answers "error in error handling"
    return {"xpcall(function() error('hostile: x') end, function() while true do end end)", {budget, kErrorInError},
            true};
  return fails(one_of(rng_, loops), {budget, kErrorInError, kStack});
}

HostileGenerator::Piece HostileGenerator::coroutine_trick(const std::string& budget) {
  switch (pick(6)) {
    case 0: return fails("coroutine.wrap(function() while true do end end)()", {budget});
    case 1:
      return fails("local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do co() end",
                   {budget});
    case 2:
      return fails("coroutine.resume(coroutine.create(function() while true do end end)) while true do end", {budget});
    case 3: return passes("local co = coroutine.wrap(function() pcall(coroutine.yield, 1) return 2 end) co() co()");
    case 4:
      return fails("local co = coroutine.create(function() local t = setmetatable({}, { __index = function() "
                   "coroutine.yield() while true do end end }) return t.x end) coroutine.resume(co) coroutine.resume(co)"
                   " while true do end",
                   {budget, "attempt to yield"});
    default:
      return fails("local function deep(n) if n == 0 then while true do end end "
                   "return coroutine.wrap(function() return deep(n - 1) end)() end deep(150)",
                   {budget, kStack});
  }
}

std::string HostileGenerator::metatable() {
  static const char* mts[] = {
      "{ __index = function() while true do end end }",
      "{ __index = function() error('hostile: index') end }",
      "{ __index = function(t, k) return t[k] end }",
      "{ __tostring = function() while true do end end }",
      "{ __tostring = function() error('hostile: tostring') end }",
      "{ __newindex = function() while true do end end, __len = function() while true do end end }",
      "{ __eq = function() while true do end end, __lt = function() error('hostile: lt') end }",
      "{ __concat = function() while true do end end, __call = function() error('hostile: call') end }",
      "{ __metatable = 'locked', __index = function() error('hostile: locked') end }",
      "{ __gc = function() while true do end end, __mode = 'k' }",
      "{ __pairs = function() while true do end end, __ipairs = function() error('hostile: ipairs') end }",
  };
  return one_of(rng_, mts);
}

// A table with a hostile metatable, used the way a chunk would: whatever its metamethods do runs
// under the budget, inside the chunk.
HostileGenerator::Piece HostileGenerator::metamethod_trap(const std::string& budget) {
  static const char* uses[] = {"local _ = T.key", "local _ = tostring(T)", "local _ = T == setmetatable({}, getmetatable(T))",
                               "local _ = T .. 'x'", "T.key = 1", "local _ = T()", "for k, v in pairs(T) do end",
                               "local _ = T < T", "local _ = string.format('%s', T)", "print(T)"};
  std::string code = "local T = setmetatable({}, " + metatable() + ") " + one_of(rng_, uses);
  return {code, {budget, kHostile, kStack, "attempt to", "bad argument"}, true};
}

HostileGenerator::Piece HostileGenerator::c_call_chain(const std::string& budget) {
  switch (pick(9)) {
    case 0: return fails("string.find(('a'):rep(40), ('a?'):rep(40)..('a'):rep(40))", {budget});
    case 1: return fails("local _ = (('a'):rep(2^18)):find('['..('b'):rep(2^18)..'a]*$')", {budget});
    case 2: return fails("local _ = (('a'):rep(2^18)):gsub('[^'..('b'):rep(2^17)..']', '%0%0')", {budget, kMemory});
    case 3:
      return fails("local _ = (('a'):rep(1e5)):gsub('a', function(c) return (('b'):rep(1e4)):gsub('b', 'c') end)",
                   {budget, kMemory});
    case 4:
      return fails("local t = {} for i = 1, 2e5 do t[i] = (i * 7919) % 2e5 end table.sort(t, function(a, b) "
                   "while true do end end)",
                   {budget});
    case 5: return fails("local t = {} for i = 1, 1e8 do t[i] = i end", {budget, kMemory});
    case 6: return fails("local _ = select('#', unpack({}, 1, 1e7))", {"too many results to unpack"});
    case 7: return fails("table.sort({3, 2, 1}, function() error('hostile: compare') end)", {kHostile});
    default: return {"local _ = (('x'):rep(1e5)):gsub('x', string.upper)", {budget}, true};
  }
}

HostileGenerator::Piece HostileGenerator::memory_hog() {
  static const char* hogs[] = {
      "local t = {} while true do t[#t + 1] = ('x'):rep(1e5) .. #t end",
      "local s = 'x' while true do s = s .. s end",
      "local _ = ('x'):rep(2^30)",
      "local t = {} for i = 1, 1e8 do t[i] = {} end",
      "local t = {} for i = 1, 1e5 do t[i] = ('y'):rep(1e3) .. i end local _ = table.concat(t)",
  };
  return fails(one_of(rng_, hogs), {kMemory, "resulting string too large", "not enough memory"});
}

HostileGenerator::Piece HostileGenerator::error_value(const std::string& budget) {
  switch (pick(6)) {
    case 0: return fails("error('hostile: plain')", {kHostile});
    case 1: return fails("error('hostile: ' .. ('x'):rep(1e6))", {kHostile});
    case 2: return fails("error({})", {kErrorObject});
    case 3:
      return fails("error(setmetatable({}, { __tostring = function() while true do end end }))",
                   {budget, kErrorInError, kErrorObject});
    case 4:
      return fails("error(setmetatable({}, { __tostring = function() return 'hostile: shown' end }))",
                   {kHostile, kErrorObject});
    default: return fails("error()", {kErrorObject, "nil"});
  }
}

HostileGenerator::Piece HostileGenerator::api_call() {
  static const char* calls[] = {
      "local _ = job.events(setmetatable({}, { __index = function() while true do end end }))",
      "local _ = job.metrics(1e9)",
      "local _ = policy.decide('allocation', setmetatable({}, { __index = function() while true do end end }))",
      "local _ = policy.decide('placement', { nodes = 1e9, slots = 1e9, experts = 1, floor = 1, replicas = {} })",
      "local _ = job.plan(1e9)",
      "help(setmetatable({}, { __tostring = function() while true do end end }))",
      "local _ = job.status()",
  };
  return {one_of(rng_, calls), {"job.", "policy.decide", "expected", "must be", "ctx"}, true};
}

// The algorithm library handed sizes past any memory cap, or shapes it does not take.
HostileGenerator::Piece HostileGenerator::library_call() {
  static const char* calls[] = {
      "sal.recovery_curve({ { 1 } }, 2e9)", "sal.spare_layout(4e6, 4e6)", "sal.min_cost_flow(4e9, {}, 1, 2)",
      "sal.golomb(2e9, 3)", "sal.matching(2e9, 2e9, {})", "sal.recovery(5, 1)", "sal.min_cost_flow(2, { 5 }, 1, 2)",
      "sal.spare_reorder({ 5 }, { true })", "sal.recovery({ { 1, 2 } }, 3e9)", "sal.spare_min_depth(2e9, 2e9)",
  };
  return {std::string("local _ = ") + one_of(rng_, calls), {"sal.", opts_.policy_budget}, true};
}

HostileGenerator::Piece HostileGenerator::statement(const std::string& budget, bool cheap_loops) {
  int r = pick(100);
  if (r < (cheap_loops ? 2 : 10)) return loop(budget);
  if (r < 18) return cheap_loops ? passes("local x = 2") : coroutine_trick(budget);
  if (r < 34) return metamethod_trap(budget);
  if (r < 46) return cheap_loops ? error_value(budget) : c_call_chain(budget);
  if (r < 52) return memory_hog();
  if (r < 62) return error_value(budget);
  if (r < 68) return fails("local function f() return 1 + f() end f()", {kStack});
  if (r < 76 && opts_.controller_api && context_ == HostileKind::repl) return api_call();
  if (r < 82 && context_ == HostileKind::policy) return library_call();
  static const char* benign[] = {"local x = 1", "local s = ('x'):rep(100)", "local _ = collectgarbage('count')",
                                 "local ok = pcall(error, 'hostile: caught')", "print(('p'):rep(20))",
                                 "local t = setmetatable({}, { __index = function() return 1 end }) local _ = t.x"};
  return passes(one_of(rng_, benign));
}

// ---- values ----

HostileGenerator::Value HostileGenerator::value(int depth) {
  switch (pick(depth < 2 ? 10 : 7)) {
    case 0: {  // shared nesting: `fan` references to one table, `levels` deep
      double fan = chance(0.5) ? 8 : 64;
      int levels = 2 + pick(3);
      std::string code = "(function() local t = {} for i = 1, " + std::to_string(int(fan)) + " do t[i] = i end for d = 2, " +
                         std::to_string(levels) + " do local u = {} for i = 1, " + std::to_string(int(fan)) +
                         " do u[i] = t end t = u end return t end)()";
      double walked = std::pow(fan, levels);
      return {passes(code), walked * 1.05, walked * (2.0 * levels + 8), 64 * fan * levels};
    }
    case 1: {  // a chain nested deeper than any conversion goes
      int n = chance(0.5) ? 100 : 100000;
      return {passes("(function() local t = {} for i = 1, " + std::to_string(n) + " do t = { t } end return t end)()"), 20,
              400, 64.0 * n};
    }
    case 2: return small("(function() local a, b = {}, {} a.b = b b.a = a a.self = a return a end)()");
    case 3: {
      static const char* odd[] = {"print", "function() end", "coroutine.create(function() end)", "coroutine.running()",
                                  "string.gmatch('a', 'a')", "string", "_G"};
      Value v = small(one_of(rng_, odd));
      if (v.piece.code == "string" || v.piece.code == "_G") v.values = 2000, v.bytes = 100000;
      return v;
    }
    case 4: {  // a string of 1 KiB, 2 MiB (past the result's text) or 64 MiB (past the cap)
      static const int kExponents[] = {10, 21, 26};
      int k = one_of(rng_, kExponents);
      double n = std::ldexp(1.0, k);
      Piece p = passes("('x'):rep(2^" + std::to_string(k) + ")");
      if (k == 26) p = fails(p.code, {kMemory, "not enough memory"});
      return {p, 1, n + 2, n};
    }
    case 5: {  // a flat list of 1 000, 100 000 or 400 000 values
      static const int kLengths[] = {1000, 100000, 400000};
      int n = one_of(rng_, kLengths);
      return {passes("(function() local t = {} for i = 1, " + std::to_string(n) + " do t[i] = i end return t end)()"),
              double(n), n * 13.0, n * 16.0};
    }
    case 6: {
      if (!opts_.controller_api || context_ != HostileKind::repl) return small("{ 1, 2, 3 }");
      static const char* api[] = {"job.status()", "policy.list()", "job.events(20)", "job.training()"};
      return {passes(one_of(rng_, api)), 600, 20000, 20000};
    }
    case 7: {  // a value under a hostile metatable: read raw, so the same as without it
      Value v = container(depth + 1);
      v.piece.code = "setmetatable(" + v.piece.code + ", " + metatable() + ")";
      return v;
    }
    default: return container(depth + 1);
  }
}

HostileGenerator::Value HostileGenerator::container(int depth) {
  int n = 1 + pick(3);
  Value out{passes(""), 1, 4, 64};
  std::vector<Piece> evals;
  std::string code = "{ ";
  for (int i = 0; i < n; ++i) {
    Value v = value(depth);
    code += (i == n - 1 && chance(0.3) ? "key = " : "") + v.piece.code + ", ";
    evals.push_back(v.piece);
    out.values += v.values + 1;
    out.bytes += v.bytes + 8;
    out.lua_bytes += v.lua_bytes;
  }
  out.piece = sequence(evals, "");
  out.piece.code = code + "}";
  return out;
}

// What returning `values` may end with: their evaluation, then their conversion to text.
HostileGenerator::Piece HostileGenerator::returned(const std::vector<Value>& values) const {
  std::vector<Piece> evals;
  double walked = 0, bytes = 0, lua_bytes = 0;
  std::string code;
  for (const auto& v : values) {
    evals.push_back(v.piece);
    code += (code.empty() ? "" : ", ") + v.piece.code;
    walked += v.values;
    bytes += v.bytes;
    lua_bytes += v.lua_bytes;
  }
  Piece out = sequence(evals, "");
  out.code = code;
  if (lua_bytes > kSafeLuaBytes) add(out.errors, {kMemory, kResultMemory});
  bool over = walked > kResultValues * kBandHigh || bytes > kResultBytes * kBandHigh;
  bool near = walked > kResultValues * kBandLow || bytes > kResultBytes * kBandLow || lua_bytes > kSafeLuaBytes;
  if (out.may_pass && (over || near)) add(out.errors, {kResultLimit, kResultMemory});
  if (over) out.may_pass = false;
  return out;
}

// ---- inputs ----

HostileInput HostileGenerator::repl_input() {
  HostileInput in;
  in.kind = HostileKind::repl;
  in.json = chance(0.3);
  std::vector<Piece> statements;
  for (int i = pick(3); i > 0; --i) statements.push_back(statement(opts_.repl_budget, false));
  std::vector<Value> values;
  for (int i = pick(4); i > 0; --i) values.push_back(value(0));
  Piece body = sequence(statements, "\n");
  Piece ret = returned(values);
  Piece all = sequence({body, ret}, "\n");
  in.text = body.code + (values.empty() ? "" : "\nreturn " + ret.code);
  in.errors = all.errors;
  add(in.errors, {opts_.repl_budget});
  in.may_succeed = all.may_pass;
  in.shape = std::to_string(statements.size()) + " statement(s), " + std::to_string(values.size()) + " value(s)";
  return in;
}

// A proposal that is not plain data: metatables, shared or cyclic nesting, functions.
HostileGenerator::Piece HostileGenerator::proposal_trap(const std::string& budget) {
  switch (pick(6)) {
    case 0: return {"return setmetatable({}, " + metatable() + ")", {kMetatable}, false};
    case 1:
      return {"local t = {} for i = 1, 1e5 do t[i] = 1 end local l = {} for i = 1, 5000 do l[i] = t end "
              "return setmetatable({}, { __index = function() return l end })",
              {kMetatable}, false};
    case 2: {
      std::string lists = "local t = {} for i = 1, 1e5 do t[i] = 1 end local l = {} for i = 1, 5000 do l[i] = t end";
      return {lists + " return { replicas = l, placement = { l }, slots = l, hosts = l, assignment = l, r = 1, window = 1 }",
              {"more than", "unknown field", "expected", budget}, false};
    }
    case 3: return {"local c = {} c[1] = c return { replicas = c, placement = c, slots = c, hosts = c }",
                    {"expected", "unknown field"}, false};
    case 4: return {"return { replicas = { print }, placement = { { print } } }", {"expected", "unknown field"}, false};
    default: return {"return coroutine.wrap(function() while true do end end)()", {budget}, false};
  }
}

// The module table: well formed, or with a hostile twist that fails its shape check for certain.
HostileGenerator::Piece HostileGenerator::module_table(const std::string& slot, const std::string& budget,
                                                       std::vector<std::string>& definite) {
  std::string fields = "api = 1, kind = '" + slot + "', name = 'hostile', doc = 'generated', decide = decide";
  switch (pick(8)) {
    case 0:
      definite = {"the module table has a metatable"};
      return passes("setmetatable({ " + fields + " }, " + metatable() + ")");
    case 1:
      definite = {"kind is"};
      return passes("{ api = 1, kind = '" + std::string(slot == "allocation" ? "placement" : "allocation") +
                    "', name = 'hostile', doc = 'd', decide = decide }");
    case 2:
      definite = {"is not part of the policy contract"};
      return passes("{ " + fields + ", [setmetatable({}, " + metatable() + ")] = 1 }");
    case 3:
      definite = {"doc: a policy needs"};
      return passes("{ api = 1, kind = '" + slot + "', name = 'hostile', doc = '', decide = decide }");
    default: {
      (void)budget;
      return passes("{ " + fields + ", selftest = selftest, save = save, restore = restore }");
    }
  }
}

HostileInput HostileGenerator::policy_input() {
  static const char* slots[] = {"allocation", "placement", "checkpoint", "redundancy", "health"};
  const std::string& budget = opts_.policy_budget;
  HostileInput in;
  in.kind = HostileKind::policy;
  in.slot = one_of(rng_, slots);
  // Something that fails for certain — at the top of the chunk, in the selftest, or in the
  // module's shape — and hostile parts besides, in decide and save, that may run or not (a slot
  // without recent decisions replays nothing).
  std::vector<std::string> definite;
  Piece module = module_table(in.slot, budget, definite);
  Piece prelude = passes("");
  Piece selftest = passes("");
  if (definite.empty()) {
    bool in_selftest = chance(0.6);
    Piece trap = in_selftest && chance(0.5) ? fails("t.eq(" + value(1).piece.code + ", setmetatable({}, " + metatable() + "))",
                                                    {"expected", "t.eq", budget, kMemory})
                                            : statement(budget, true);
    if (trap.may_pass) trap = sequence({trap, fails("error('hostile: trap')", {kHostile})}, " ");
    (in_selftest ? selftest : prelude) = trap;
  }
  Piece decide = chance(0.6) ? proposal_trap(budget) : sequence({statement(budget, true), proposal_trap(budget)}, " ");
  Piece save = chance(0.5) ? passes("return " + value(1).piece.code) : statement(budget, true);
  in.text = prelude.code + "\nlocal function decide(ctx) " + decide.code + " end\n" +
            "local function selftest(t) " + selftest.code + " end\n" + "local function save() " + save.code +
            " end\nlocal function restore(s) end\nreturn " + module.code + "\n";
  Piece loading = sequence({prelude, module}, " ");
  in.errors = definite;
  add(in.errors, loading.errors);
  add(in.errors, selftest.errors);
  add(in.errors, decide.errors);
  add(in.errors, save.errors);
  add(in.errors, {budget, kMemory, kMetatable, "malformed proposal", "state migration", "replay of recent decision"});
  in.may_succeed = false;
  in.shape = "a " + in.slot + " policy";
  return in;
}

HostileInput HostileGenerator::drill_input() {
  const std::string& budget = opts_.drill_budget;
  HostileInput in;
  in.kind = HostileKind::drill;
  static const char* calls[] = {"kill", "drain", "freeze", "partition", "add", "expect", "drill"};
  std::vector<Piece> pieces;
  for (int i = 1 + pick(3); i > 0; --i) {
    if (chance(0.4)) {
      pieces.push_back(statement(budget, true));
      continue;
    }
    std::string call = one_of(rng_, calls);
    switch (pick(5)) {
      case 0:
        pieces.push_back({call + "{ node = " + value(0).piece.code + ", step = 1 }",
                          {"the drill's calls: more than", kMemory, budget}, true});
        break;
      case 1:
        pieces.push_back({"for i = 1, 1e6 do " + call + "{ node = 1, step = i } end", {"the drill's calls: more than", budget},
                          false});
        break;
      case 2:
        pieces.push_back({call + "(setmetatable({ node = 1 }, " + metatable() + "))", {}, true});
        break;
      case 3: pieces.push_back({call + "(5)", {"takes one table"}, false}); break;
      default:
        pieces.push_back({call + "{ args = args, node = setmetatable({}, { __index = function() while true do end end }) }", {},
                          true});
    }
  }
  // Never a drill that starts: the script always ends with an error.
  pieces.push_back(fails("error('hostile: drill end')", {kHostile}));
  Piece all = sequence(pieces, "\n");
  in.text = all.code + "\n";
  in.errors = all.errors;
  add(in.errors, {budget, kMemory});
  in.may_succeed = false;
  in.shape = std::to_string(pieces.size()) + " drill statement(s)";
  return in;
}

}  // namespace sal::test
