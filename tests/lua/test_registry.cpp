// test_registry.cpp — one registration table drives installation, roles, help() and completion.
#include <doctest/doctest.h>

#include "lua/registry.h"

using namespace sal;
using namespace sal::lua;

namespace {

ApiRegistry make_registry() {
  ApiRegistry reg;
  reg.add_module("job", "the job");
  reg.add({"job", "status", "job.status() -> table", "Where the job stands.", Role::observe,
           [](lua_State* L) { lua_pushinteger(L, 7); return 1; }});
  reg.add({"job", "kill", "job.kill(id)", "Kills a node.", Role::operate,
           [](lua_State* L) { lua_pushboolean(L, 1); return 1; }});
  reg.add({"job", "fail", "job.fail()", "Throws.", Role::observe,
           [](lua_State*) -> int { throw std::runtime_error("no such node"); }});
  return reg;
}

Status run_chunk(Sandbox& sb, const std::string& code) {
  SAL_TRY(sb.load(code, "=t"));
  return sb.call(0, 0, {.deadline_ms = 500});
}

}  // namespace

TEST_CASE("functions are installed for the role and nothing more") {
  auto reg = make_registry();
  Sandbox obs({.name = "obs"});
  reg.install(obs, Role::observe);
  obs.set_identity("bob (observe)");
  CHECK(run_chunk(obs, "assert(job.status() == 7)").ok());
  auto refused = run_chunk(obs, "job.kill(1)");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("job.kill needs role operate; bob (observe) has role observe") !=
        std::string::npos);
  Sandbox op({.name = "op"});
  reg.install(op, Role::operate);
  CHECK(run_chunk(op, "assert(job.kill(1) == true)").ok());
  CHECK(run_chunk(op, "job.status = nil").error().message().find("job is read-only") != std::string::npos);
}

TEST_CASE("every call of a function that acts is reported before it runs, with its arguments") {
  auto reg = make_registry();
  std::vector<std::string> calls;
  reg.on_acting_call = [&](lua_State* L, const ApiEntry& e) {
    calls.push_back(e.qualified() + "/" + std::to_string(lua_gettop(L)) + "/" + Sandbox::identity(L));
  };
  Sandbox sb({.name = "t"});
  sb.set_identity("alice");
  reg.install(sb, Role::admin);
  CHECK(run_chunk(sb, "job.status() job.kill(3, 'x')").ok());
  CHECK(calls == std::vector<std::string>{"job.kill/2/alice"});
}

TEST_CASE("a C++ exception becomes a Lua error naming the function") {
  auto reg = make_registry();
  Sandbox sb({.name = "t"});
  reg.install(sb, Role::admin);
  auto s = run_chunk(sb, "job.fail()");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("job.fail: no such node") != std::string::npos);
  CHECK(run_chunk(sb, "local ok, err = pcall(job.fail) assert(not ok and err:find('no such node'))").ok());
}

TEST_CASE("help comes from the registrations") {
  auto reg = make_registry();
  CHECK(reg.help("", Role::observe).find("job.status() -> table") != std::string::npos);
  CHECK(reg.help("", Role::observe).find("job.kill") == std::string::npos);
  CHECK(reg.help("job.kill", Role::observe).find("needs role operate") != std::string::npos);
  CHECK(reg.help("job.kill", Role::admin).find("Kills a node.") != std::string::npos);
  std::string printed;
  Sandbox sb({.name = "t", .print = [&](const std::string& s) { printed += s; }});
  reg.install(sb, Role::observe);
  CHECK(run_chunk(sb, "help(job.status)").ok());
  CHECK(printed.find("Where the job stands.") != std::string::npos);
}

TEST_CASE("completion finds modules, functions and session globals") {
  auto reg = make_registry();
  CHECK(reg.complete("jo", Role::observe, {}) == std::vector<std::string>{"job."});
  CHECK(reg.complete("x = job.st", Role::observe, {}) == std::vector<std::string>{"x = job.status("});
  CHECK(reg.complete("job.k", Role::observe, {}).empty());
  CHECK(reg.complete("job.k", Role::operate, {}) == std::vector<std::string>{"job.kill("});
  CHECK(reg.complete("myv", Role::observe, {"myvar", "other"}) == std::vector<std::string>{"myvar"});
}

TEST_CASE("completion stays small whatever the session holds or the line is") {
  auto reg = make_registry();
  Sandbox sb({.name = "t"});
  REQUIRE(sb.load("for i = 1, 1e5 do _G['v' .. i] = i end _G[('w'):rep(1000)] = 1", "=t").ok());
  REQUIRE(sb.call(0, 0, {.deadline_ms = 2000}).ok());
  auto names = sb.global_names("v1", ApiRegistry::kMaxCompletions);
  CHECK(names.size() == ApiRegistry::kMaxCompletions);
  CHECK(sb.global_names("ww").empty());  // a name no one types is not offered
  auto all = reg.complete("", Role::observe, sb.global_names("", ApiRegistry::kMaxCompletions));
  CHECK(all.size() <= ApiRegistry::kMaxCompletions);
  CHECK(reg.complete(std::string(ApiRegistry::kMaxCompletionLine + 1, 'x') + " jo", Role::observe, {}).empty());
  CHECK(ApiRegistry::completion_word("x = job.st") == "job.st");
}
