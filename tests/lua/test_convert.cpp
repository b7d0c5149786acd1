// test_convert.cpp — rendering Lua values for people (Lua text) and programs (JSON), and copying
// plain data between states: every conversion reads raw (no metamethod runs) and is counted by a
// Meter, which stops it at its value or byte limit, or at the running call's budget, naming which.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "lua/convert.h"
#include "lua/sandbox.h"

using namespace sal;
using namespace sal::lua;

namespace {

// Evaluates `expr` and converts its value inside the same budgeted call (as the REPL does).
Result<std::string> convert(Sandbox& sb, const std::string& expr, bool json, MeterLimits limits = {},
                            int64_t budget_ms = 500) {
  REQUIRE(sb.load("return " + expr, "=t").ok());
  std::string out;
  auto s = sb.run(1, 0, {.deadline_ms = budget_ms, .what = "test budget"}, [&](lua_State* L) -> Status {
    lua_call(L, 0, 1);
    Meter m(L, limits);
    if (json) {
      auto j = to_json(L, -1, m);
      if (!j) return j.error();
      out = j->dump();
    } else {
      auto t = render(L, -1, m);
      if (!t) return t.error();
      out = *t;
    }
    return {};
  });
  if (!s) return s.error();
  return out;
}

std::string eval_render(Sandbox& sb, const std::string& expr, bool json) {
  auto r = convert(sb, expr, json);
  REQUIRE_MESSAGE(r.ok(), r.error().message());
  return *r;
}

// 64 references to one 64-entry table, nested four deep: 16.7 M values once walked, 33 KB in Lua.
const char* kShared = "(function() local t = {} for i = 1, 64 do t[i] = i end "
                      "for d = 1, 3 do local u = {} for i = 1, 64 do u[i] = t end t = u end return t end)()";

}  // namespace

TEST_CASE("Lua text: sorted keys, arrays, quoting, integers") {
  Sandbox sb({.name = "t"});
  CHECK(eval_render(sb, "{b = 1, a = 'x\\n', [3] = true}", false) == "{ [3] = true, a = \"x\\n\", b = 1 }");
  CHECK(eval_render(sb, "{1, 2.5, 'z'}", false) == "{ 1, 2.5, \"z\" }");
  CHECK(eval_render(sb, "{['end'] = 1}", false) == "{ [\"end\"] = 1 }");
  CHECK(eval_render(sb, "{}", false) == "{}");
}

TEST_CASE("cycles and depth are bounded") {
  Sandbox sb({.name = "t"});
  CHECK(eval_render(sb, "(function() local t = {} t.self = t return t end)()", false) == "{ self = <cycle> }");
  CHECK(eval_render(sb, "(function() local t = {} t.self = t return t end)()", true) == "{\"self\":\"<cycle>\"}");
}

TEST_CASE("JSON: arrays, objects, NaN, functions") {
  Sandbox sb({.name = "t"});
  CHECK(eval_render(sb, "{1, 2, {x = 0/0}}", true) == "[1,2,{\"x\":null}]");
  CHECK(eval_render(sb, "{f = print, n = 1.5}", true) == "{\"f\":\"<function>\",\"n\":1.5}");
  CHECK(eval_render(sb, "{}", true) == "[]");
}

TEST_CASE("push_json round-trips through Lua") {
  Sandbox sb({.name = "t"});
  auto j = nlohmann::ordered_json::parse(R"({"a":[1,2,3],"b":{"c":"d"},"e":null,"f":true})");
  push_json(sb.L(), j);
  lua_setglobal(sb.L(), "J");
  CHECK(eval_render(sb, "J", true) == R"({"a":[1,2,3],"b":{"c":"d"},"f":true})");
}

TEST_CASE("conversions read raw: metamethods never run, and a raising __index is no error") {
  Sandbox sb({.name = "t"});
  const std::string trap = "setmetatable({ a = 1 }, { __index = function() while true do end end, "
                           "__pairs = function() error('pairs') end, __len = function() error('len') end, "
                           "__tostring = function() while true do end end })";
  CHECK(eval_render(sb, trap, false) == "{ a = 1 }");
  CHECK(eval_render(sb, trap, true) == "{\"a\":1}");
  CHECK(eval_render(sb, "{ setmetatable({}, { __index = function() error('boom') end }) }", false) == "{ {} }");
}

TEST_CASE("a shared nesting of 16.7 M values stops at the value limit, naming it, in milliseconds") {
  Sandbox sb({.name = "t"});
  MeterLimits limits{.what = "the result", .values = {100000, "the test's value limit"}};
  for (bool json : {false, true}) {
    int64_t t0 = mono_ns();
    auto r = convert(sb, kShared, json, limits);
    double ms = double(mono_ns() - t0) / 1e6;
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message() == "the result: more than 100000 values (the test's value limit)");
    CHECK(ms < 400);
  }
}

TEST_CASE("text past the byte limit stops the conversion, before the string is copied") {
  Sandbox sb({.name = "t"});
  MeterLimits limits{.what = "the result", .bytes = {1000, "the test's byte limit"}};
  auto r = convert(sb, "('x'):rep(2e7)", false, limits);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == "the result: more than 1000 bytes (the test's byte limit)");
  CHECK_FALSE(convert(sb, "{('x'):rep(600), ('y'):rep(600)}", true, limits).ok());
  CHECK(convert(sb, "{('x'):rep(100)}", true, limits).ok());
}

TEST_CASE("a conversion stops at the running call's budget, with its error") {
  Sandbox sb({.name = "t"});
  // No value limit to speak of: the budget stops the walk of 16.7 M values.
  MeterLimits limits{.what = "the result", .values = {size_t(1) << 40, "none"}, .bytes = {size_t(1) << 40, "none"}};
  int64_t t0 = mono_ns();
  auto r = convert(sb, kShared, false, limits, 200);
  double ms = double(mono_ns() - t0) / 1e6;
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("test budget exceeded") != std::string::npos);
  CHECK(r.error().message().find("while converting the result") != std::string::npos);
  CHECK(ms < 200 + 100);
}

TEST_CASE("a quote for a log line is short whatever the value") {
  Sandbox sb({.name = "t"});
  REQUIRE(sb.load("return " + std::string(kShared), "=t").ok());
  REQUIRE(sb.call(0, 1, {.deadline_ms = 500}).ok());
  int64_t t0 = mono_ns();
  std::string q = render_quote(sb.L(), -1, 200);
  CHECK(double(mono_ns() - t0) / 1e6 < 50);
  CHECK(q.size() <= 200 + 4);
  lua_pop(sb.L(), 1);
}

TEST_CASE("copying plain data counts its values, refuses functions and cycles, and caps the target") {
  Sandbox from({.name = "from"}), to({.name = "to", .memory_limit = 4u << 20});
  REQUIRE(from.load("return {a = {1, 2, 3}, b = 'x'}", "=t").ok());
  REQUIRE(from.call(0, 1, {.deadline_ms = 500}).ok());
  auto copy = [&](MeterLimits limits) {
    return to.run(0, 1, {.deadline_ms = 500}, [&](lua_State* L) -> Status {
      Meter m(L, limits);
      return copy_value(from.L(), lua_gettop(from.L()), L, m);
    });
  };
  REQUIRE(copy({}).ok());
  CHECK(lua_istable(to.L(), -1));
  lua_settop(to.L(), 0);
  auto few = copy({.what = "the state", .values = {3, "three"}});
  REQUIRE_FALSE(few.ok());
  CHECK(few.error().message() == "the state: more than 3 values (three)");
  lua_settop(from.L(), 0);
  // A state larger than the target's cap: a clean memory error in the target, not a crash.
  REQUIRE(from.load("local t = {} for i = 1, 4e5 do t[i] = 'v' .. i end return t", "=t").ok());
  REQUIRE(from.call(0, 1, {.deadline_ms = 2000}).ok());
  auto big = copy({});
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().message().find("memory limit of 4 MiB exceeded") != std::string::npos);
  CHECK(lua_gettop(to.L()) == 0);
}

TEST_CASE("userdata, threads and functions are named by their type, their metatables never consulted") {
  Sandbox sb({.name = "t"});
  lua_State* L = sb.L();
  lua_newuserdata(L, 16);
  // (no __gc: sandboxed code cannot make a userdata, and a host that did would run its __gc at close)
  REQUIRE(sb.load("return { __index = function() while true do end end, __tostring = function() while true do end end }",
                  "=t").ok());
  REQUIRE(sb.call(0, 1, {.deadline_ms = 500}).ok());
  lua_setmetatable(L, -2);
  lua_setglobal(L, "U");
  CHECK(eval_render(sb, "{ U, print, coroutine.create(print) }", false) == "{ <userdata>, <function>, <thread> }");
  CHECK(eval_render(sb, "{ u = U }", true) == "{\"u\":\"<userdata>\"}");
}

namespace {

int integer_arg(lua_State* L) {
  lua_pushnumber(L, double(check_integer(L, 1, "f", "a count")));
  return 1;
}

// f(<expr>) through check_integer: its value, or its error.
std::string call_with(lua_State* L, const std::string& expr) {
  REQUIRE(luaL_loadstring(L, ("local f = ...; return f(" + expr + ")").c_str()) == 0);
  lua_pushcfunction(L, integer_arg);
  const bool failed = lua_pcall(L, 1, 1, 0) != 0;
  std::string out = failed ? lua_tostring(L, -1) : std::to_string(int64_t(lua_tonumber(L, -1)));
  lua_pop(L, 1);
  return out;
}

}  // namespace

TEST_CASE("an integer argument: infinities, NaN, fractions and numbers past 2^53 are named, never converted") {
  lua_State* L = luaL_newstate();
  CHECK(call_with(L, "42") == "42");
  CHECK(call_with(L, "-7") == "-7");
  CHECK(call_with(L, "2^53") == "9007199254740992");
  for (const char* bad : {"1/0", "-1/0", "0/0", "1.5", "2^60"}) {
    CAPTURE(bad);
    CHECK(call_with(L, bad).find("f: argument 1 must be a count (an integer), got ") != std::string::npos);
  }
  CHECK(call_with(L, "1/0").find("got inf") != std::string::npos);
  CHECK(call_with(L, "'x'").find("got string") != std::string::npos);
  lua_close(L);
}
