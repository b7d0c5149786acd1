// repl_eval.cpp — see repl_eval.h.
#include "console/repl_eval.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "core/clock.h"
#include "core/json_text.h"
#include "core/strings.h"
#include "lua/convert.h"
#include "console/loop_calls.h"

namespace sal::console {
namespace {

thread_local LoopCalls* t_calls = nullptr;

using Body = std::function<int(lua_State*)>;

// A body on its way to the loop thread, and the C++ exception it may throw there.
struct Crossing {
  const Body* body;
  bool threw = false;
  std::string what;
};

// The body as a lua_CFunction (upvalue 1: the Crossing). A C++ exception is kept, to be thrown
// again on the evaluation thread (the registry's trampoline turns it into the function's error).
int body_function(lua_State* L) {
  auto* x = static_cast<Crossing*>(lua_touserdata(L, lua_upvalueindex(1)));
  try {
    return (*x->body)(L);
  } catch (const std::exception& e) {
    x->threw = true;
    x->what = e.what();
  }
  return 0;
}

}  // namespace

void set_thread_loop_calls(LoopCalls* calls) { t_calls = calls; }

bool run_on_loop(const std::function<void()>& fn) {
  if (!t_calls) {
    fn();
    return true;
  }
  return t_calls->run(fn);
}

int call_on_loop(lua_State* L, const Body& body) {
  if (!t_calls || t_calls->on_loop_thread()) return body(L);
  int rc = 0;
  Crossing x{&body};
  // On the loop thread, under a pcall of its own: an error unwinds the loop thread's stack only,
  // and is raised again here, on the evaluation thread.
  bool ran = t_calls->run([&] {
    int nargs = lua_gettop(L);
    lua_pushlightuserdata(L, &x);
    lua_pushcclosure(L, body_function, 1);
    lua_insert(L, 1);
    rc = lua_pcall(L, nargs, LUA_MULTRET, 0);
  });
  if (!ran) throw std::runtime_error("the controller is stopping");
  if (x.threw) throw std::runtime_error(x.what);
  if (rc != 0) return lua_error(L);
  return lua_gettop(L);
}

wire::ReplResult evaluate(lua::Sandbox& sb, std::string& output, const wire::ReplEval& req, const lua::Budget& budget) {
  lua_State* L = sb.L();
  int top = lua_gettop(L);
  wire::ReplResult res;
  res.id = req.id;
  output.clear();
  int64_t t0 = mono_ns();
  // Like lua.c: try it as an expression first, then as statements.
  Status st = sb.load("return " + req.chunk, "=repl");
  if (!st) st = sb.load(req.chunk, "=repl");
  if (st) st = sb.call(0, LUA_MULTRET, budget);
  res.elapsed_us = uint64_t((mono_ns() - t0) / 1000);
  res.output = std::move(output);
  output.clear();
  if (!st) {
    res.error = st.error().message();
    lua_settop(L, top);
    return res;
  }
  int n = lua_gettop(L) - top;
  res.ok = true;
  if (req.format == wire::ValueFormat::json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (int i = 1; i <= n; ++i) arr.push_back(lua::to_json(L, top + i));
    res.value = json_text(arr);
  } else {
    std::vector<std::string> parts;
    for (int i = 1; i <= n; ++i) parts.push_back(lua::render(L, top + i));
    res.value = join(parts, "\t");
  }
  lua_settop(L, top);
  return res;
}

}  // namespace sal::console
