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

// A result's text, at most this long: far below the wire's limit for a REPL value (kOutputMax).
constexpr size_t kResultBytes = 1u << 20;
// Values walked to render a result: enough for any table its text limit can show.
constexpr size_t kResultValues = size_t(1) << 18;

// What rendering a session's result may cost: the limits above, lowered to what the session's
// memory cap leaves free — after a full collection when it would lower them, so that garbage the
// chunk left does not count.
lua::MeterLimits result_limits(lua_State* L) {
  const std::string name = "the REPL's result limit; return a part of it: a field, a slice, a count";
  lua::MeterLimits l{.what = "the result", .values = {kResultValues, name}, .bytes = {kResultBytes, name}};
  if (lua::Sandbox::memory_left(L) / lua::kValueCost < kResultValues) lua_gc(L, LUA_GCCOLLECT, 0);
  size_t cap = lua::Sandbox::memory_cap(L);
  return lua::within_memory(l, lua::Sandbox::memory_left(L),
                            "repl.memory_mb: " + std::to_string(cap >> 20) + " MiB, with what the session holds");
}

// The n values at the top of L as Lua text (tab-separated) or as a JSON array, counted.
Result<std::string> result_text(lua_State* L, int n, wire::ValueFormat format) {
  lua::Meter meter(L, result_limits(L));
  int first = lua_gettop(L) - n + 1;
  if (format == wire::ValueFormat::json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (int i = first; i < first + n; ++i) {
      auto v = lua::to_json(L, i, meter);
      if (!v) return v.error();
      arr.push_back(std::move(*v));
    }
    std::string text = json_text(arr);
    SAL_TRY(meter.check_total(text.size()));
    return text;
  }
  std::vector<std::string> parts;
  for (int i = first; i < first + n; ++i) {
    auto v = lua::render(L, i, meter);
    if (!v) return v.error();
    parts.push_back(std::move(*v));
  }
  std::string text = join(parts, "\t");
  SAL_TRY(meter.check_total(text.size()));
  return text;
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
  // The chunk and the conversion of what it returns run in one budgeted call: the values are
  // read raw and counted (lua/convert.h), so no result outlives the budget or the memory cap.
  if (st) st = sb.run(1, 0, budget, [&](lua_State* S) -> Status {
    lua_call(S, 0, LUA_MULTRET);
    auto value = result_text(S, lua_gettop(S), req.format);
    if (!value) return value.error();
    res.value = std::move(*value);
    return {};
  });
  res.elapsed_us = uint64_t((mono_ns() - t0) / 1000);
  res.output = std::move(output);
  output.clear();
  lua_settop(L, top);
  if (!st) {
    res.value.clear();
    res.error = st.error().message();
    return res;
  }
  res.ok = true;
  return res;
}

}  // namespace sal::console
