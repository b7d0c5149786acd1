// test_sandbox.cpp — the LuaJIT sandbox: what is reachable, what is not, and that budgets and
// memory caps stop runaway code (with the JIT off, so hooks fire) while the state stays usable.
#include <doctest/doctest.h>

#include "core/clock.h"
#include "lua/sandbox.h"

using namespace sal;
using namespace sal::lua;

namespace {

Status run(Sandbox& sb, const std::string& code, int64_t budget_ms = 500) {
  SAL_TRY(sb.load(code, "=test"));
  return sb.call(0, 0, {.deadline_ms = budget_ms});
}

}  // namespace

TEST_CASE("dangerous globals are gone and bytecode is refused") {
  Sandbox sb({.name = "t", .strict_reads = false});
  for (const char* g : {"io", "os", "debug", "ffi", "jit", "require", "dofile", "loadfile", "load",
                        "loadstring", "setfenv", "getfenv", "rawset", "package", "module"}) {
    CAPTURE(g);
    CHECK(run(sb, std::string("assert(") + g + " == nil)").ok());
  }
  CHECK(run(sb, "assert(string.dump == nil)").ok());
  std::string bytecode = "\x1bLJ\x02";
  CHECK_FALSE(sb.load(bytecode, "=bc").ok());
}

TEST_CASE("strict reads name the unknown global and suggest the closest") {
  Sandbox sb({.name = "t"});
  CHECK(run(sb, "job = {}").ok());
  auto s = run(sb, "return jbo.status");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("unknown global 'jbo' (did you mean 'job'?)") != std::string::npos);
  sb.allow_global("optional_thing");
  CHECK(run(sb, "assert(optional_thing == nil)").ok());
}

TEST_CASE("strict writes refuse new globals but locals are fine") {
  Sandbox sb({.name = "t", .strict_writes = true});
  CHECK(run(sb, "local x = 1 return x").ok());
  CHECK(run(sb, "y = 2").error().message().find("undeclared global 'y'") != std::string::npos);
}

TEST_CASE("a runaway loop is stopped by the budget, even inside pcall, and the state survives") {
  Sandbox sb({.name = "t"});
  int64_t t0 = mono_ns();
  auto s = run(sb, "while true do pcall(function() while true do end end) end", 200);
  double ms = double(mono_ns() - t0) / 1e6;
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("budget exceeded") != std::string::npos);
  CHECK(ms >= 190);
  CHECK(ms < 400);
  CHECK(run(sb, "local n = 0 for i = 1, 1000 do n = n + i end assert(n == 500500)").ok());
}

TEST_CASE("the service callback runs while a chunk is busy") {
  Sandbox sb({.name = "t"});
  int calls = 0;
  Budget b{.deadline_ms = 150, .service_every_ms = 10, .service = [&] { ++calls; }};
  REQUIRE(sb.load("while true do end", "=spin").ok());
  CHECK_FALSE(sb.call(0, 0, b).ok());
  CHECK(calls >= 8);
}

TEST_CASE("memory beyond the cap is refused and the state recovers") {
  Sandbox sb({.name = "t", .memory_limit = 8u << 20});
  auto s = run(sb, "local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 64) .. i end", 5000);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("memory limit of 8 MiB exceeded") != std::string::npos);
  CHECK(sb.memory_used() <= (8u << 20));
  CHECK(run(sb, "local s = string.rep('y', 1000) assert(#s == 1000)").ok());
}

TEST_CASE("a call past its deadline gets no large block, so a string doubled in C stops at the budget") {
  // `s .. s` is one VM instruction that copies the whole string: the count hook never runs inside
  // it, and a cap of a GiB leaves room for seconds of page faults. The allocator refuses the call
  // any block of 64 KiB or more once its deadline has passed; the error names the budget.
  Sandbox sb({.name = "t", .memory_limit = size_t(1) << 30});
  for (const char* code : {"local s = 'x' while true do s = s .. s end",
                           "local s = 'x' while true do pcall(function() s = s .. s end) end"}) {
    CAPTURE(code);
    auto s = run(sb, code, 20);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message().find("budget exceeded") != std::string::npos);
    CHECK(s.error().message().find("memory limit") == std::string::npos);
  }
  CHECK(run(sb, "local s = string.rep('y', 1048576) assert(#s == 1048576)").ok());
}

TEST_CASE("errors carry the position and a trimmed traceback") {
  Sandbox sb({.name = "t"});
  auto s = run(sb, "local function f() error('boom') end\nlocal function g() f() end\ng()");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("test:1: boom") == 0);
  CHECK(s.error().message().find("stack traceback") != std::string::npos);
  CHECK(s.error().message().find("[C]") == std::string::npos);
}

TEST_CASE("print goes to the sink, and read-only tables refuse writes") {
  std::string out;
  Sandbox sb({.name = "t", .print = [&](const std::string& s) { out += s + "\n"; }});
  CHECK(run(sb, "print('a', 1, nil, true)").ok());
  CHECK(out == "a\t1\tnil\ttrue\n");
  lua_newtable(sb.L());
  lua_pushinteger(sb.L(), 5);
  lua_setfield(sb.L(), -2, "x");
  Sandbox::make_readonly(sb.L(), "api");
  lua_setglobal(sb.L(), "api");
  CHECK(run(sb, "assert(api.x == 5)").ok());
  CHECK(run(sb, "api.x = 6").error().message().find("api is read-only") != std::string::npos);
  CHECK_FALSE(run(sb, "setmetatable(api, nil)").ok());
  CHECK(run(sb, "assert(getmetatable(api) == 'api')").ok());
}

TEST_CASE("host work runs inside the budget: its Lua errors, the hook and the memory cap are caught") {
  Sandbox sb({.name = "t", .memory_limit = 8u << 20});
  // The work's arguments are the values on top; what it leaves comes back.
  lua_pushinteger(sb.L(), 20);
  lua_pushinteger(sb.L(), 22);
  REQUIRE(sb.run(2, 1, {.deadline_ms = 200}, [](lua_State* L) -> Status {
              lua_pushinteger(L, lua_tointeger(L, 1) + lua_tointeger(L, 2));
              return {};
            }).ok());
  CHECK(lua_tointeger(sb.L(), -1) == 42);
  lua_settop(sb.L(), 0);
  // A Lua function it calls that never ends is stopped by the hook, with the budget's error.
  REQUIRE(run(sb, "function spin() while true do end end").ok());
  int64_t t0 = mono_ns();
  auto spun = sb.run(0, 0, {.deadline_ms = 150, .what = "work budget"}, [](lua_State* L) -> Status {
    lua_getglobal(L, "spin");
    lua_call(L, 0, 0);
    return {};
  });
  REQUIRE_FALSE(spun.ok());
  CHECK(spun.error().message().find("work budget exceeded") != std::string::npos);
  CHECK(double(mono_ns() - t0) / 1e6 < 150 + 100);
  // A work error comes back as it is, and the stack is as it was.
  auto failed = sb.run(0, 1, {.deadline_ms = 200}, [](lua_State*) -> Status { return fail("no such thing"); });
  CHECK(failed.error().message() == "no such thing");
  CHECK(lua_gettop(sb.L()) == 0);
  // Pushing past the memory cap is a clean error.
  auto hoard = sb.run(0, 0, {.deadline_ms = 2000}, [](lua_State* L) -> Status {
    for (int i = 0; i < 1 << 20; ++i) lua_pushstring(L, std::to_string(i).append(100, 'x').c_str()), lua_rawseti(L, LUA_GLOBALSINDEX, i + 1000);
    return {};
  });
  REQUIRE_FALSE(hoard.ok());
  CHECK(hoard.error().message().find("memory limit of 8 MiB exceeded") != std::string::npos);
}

TEST_CASE("a state filled to its cap leaves the host's next call working") {
  Sandbox sb({.name = "t", .memory_limit = 4u << 20});
  // Fill the state to the last byte and keep it full, from inside pcall.
  CHECK(run(sb, "KEEP = {} pcall(function() while true do KEEP[#KEEP + 1] = {} end end)", 2000).ok());
  for (int i = 0; i < 3; ++i) {
    auto s = run(sb, "return #KEEP");
    if (!s) CHECK(s.error().message().find("memory limit") != std::string::npos);
  }
  CHECK(run(sb, "KEEP = nil").ok());
  CHECK(run(sb, "local t = {} for i = 1, 1000 do t[i] = i end").ok());
}

TEST_CASE("an error of megabytes is cut, and unknown globals stay cheap among many") {
  Sandbox sb({.name = "t"});
  auto big = run(sb, "error(('x'):rep(1e7))");
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().message().size() < 9000);
  CHECK(big.error().message().find("an error message of") != std::string::npos);
  REQUIRE(run(sb, "for i = 1, 3e5 do _G['g' .. i] = i end", 5000).ok());
  int64_t t0 = mono_ns();
  auto s = run(sb, "for i = 1, 100 do pcall(function() return g00001 end) end return g00001x");
  CHECK(double(mono_ns() - t0) / 1e6 < 400);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("unknown global 'g00001x'") != std::string::npos);
  auto longname = run(sb, "return _G[('y'):rep(1e6)] + 1");
  REQUIRE_FALSE(longname.ok());
  CHECK(longname.error().message().size() < 9000);
}
