// test_convert.cpp — rendering Lua values for people (Lua text) and programs (JSON).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "lua/convert.h"
#include "lua/sandbox.h"

using namespace sal;
using namespace sal::lua;

namespace {

std::string eval_render(Sandbox& sb, const std::string& expr, bool json) {
  REQUIRE(sb.load("return " + expr, "=t").ok());
  REQUIRE(sb.call(0, 1, {.deadline_ms = 500}).ok());
  std::string out = json ? to_json(sb.L(), -1).dump() : render(sb.L(), -1);
  lua_pop(sb.L(), 1);
  return out;
}

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
  REQUIRE(sb.load("local t = {} t.self = t return t", "=t").ok());
  REQUIRE(sb.call(0, 1, {.deadline_ms = 500}).ok());
  CHECK(render(sb.L(), -1) == "{ self = <cycle> }");
  CHECK(to_json(sb.L(), -1).dump() == "{\"self\":\"<cycle>\"}");
  lua_pop(sb.L(), 1);
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
  CHECK(to_json(sb.L(), -1).dump() == R"({"a":[1,2,3],"b":{"c":"d"},"f":true})");
  lua_pop(sb.L(), 1);
}
