// fuzz_lua.cpp — what a REPL session or a policy feeds the Lua host. `repl`: a chunk as a client
// sends it, checked by the console's multi-line test and run in a fresh session sandbox under a
// small budget and memory cap (it must end — by itself, by the budget or by the cap — and leave the
// state usable). `pattern`: the bounded string library (lua/strlib.h) against LuaJIT's own, on a
// subject and a pattern cut from the input: the same results and the same errors, or a trap.
#include <lua.hpp>

#include "fuzz/targets.h"
#include "lua/sandbox.h"
#include "lua/strlib.h"
#include "repl/client.h"

namespace sal::fuzz {
namespace {

// A Lua state with the stock libraries, optionally with the bounded ones.
lua_State* stock_state(bool bounded) {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  if (bounded) lua::install_bounded_library(L);
  return L;
}

// Runs f(s, p [, r]) in L and serialises every result (or the error, without its position).
std::string call(lua_State* L, const char* lib, const char* fn, const std::string& s, const std::string& p,
                 const char* repl) {
  int top = lua_gettop(L);
  lua_getglobal(L, lib);
  lua_getfield(L, -1, fn);
  lua_pushlstring(L, s.data(), s.size());
  lua_pushlstring(L, p.data(), p.size());
  int nargs = 2;
  if (repl) {
    lua_pushstring(L, repl);
    ++nargs;
  }
  std::string out;
  if (lua_pcall(L, nargs, LUA_MULTRET, 0) != 0) {
    std::string m = lua_tostring(L, -1) ? lua_tostring(L, -1) : "?";
    out = "error: " + m.substr(m.find(": ") == std::string::npos ? 0 : m.find(": ") + 2);
  } else {
    for (int i = top + 2; i <= lua_gettop(L); ++i) {
      size_t n = 0;
      const char* v = lua_tolstring(L, i, &n);
      out += std::string(luaL_typename(L, i)) + ":" + (v ? std::string(v, n) : "") + ";";
    }
  }
  lua_settop(L, top);
  return out;
}

}  // namespace

int repl(const uint8_t* data, size_t size) {
  std::string chunk = text_of(data, size);
  std::string error;
  (void)repl::check_chunk(chunk, &error);
  lua::Sandbox sb({.name = "fuzz session", .memory_limit = 8u << 20});
  lua::Budget budget{.deadline_ms = 20, .what = "fuzz budget"};
  for (const std::string& text : {"return " + chunk, chunk}) {
    if (!sb.load(text, "=repl")) continue;
    (void)sb.call(0, LUA_MULTRET, budget);
    break;
  }
  lua_settop(sb.L(), 0);
  if (!sb.load("return 6 * 7", "=after") || !sb.call(0, 1, budget) || lua_tointeger(sb.L(), -1) != 42)
    __builtin_trap();  // the session must still work
  return 0;
}

int pattern(const uint8_t* data, size_t size) {
  static lua_State* ours = stock_state(true);
  static lua_State* theirs = stock_state(false);
  if (size < 1) return 0;
  size_t cut = std::min<size_t>(data[0] % 16, size - 1);
  std::string s = text_of(data + 1, cut), p = text_of(data + 1 + cut, std::min<size_t>(size - 1 - cut, 16));
  for (const char* fn : {"find", "match"})
    if (call(ours, "string", fn, s, p, nullptr) != call(theirs, "string", fn, s, p, nullptr)) __builtin_trap();
  for (const char* r : {"<%0>", "%1%2", "%"})
    if (call(ours, "string", "gsub", s, p, r) != call(theirs, "string", "gsub", s, p, r)) __builtin_trap();
  return 0;
}

}  // namespace sal::fuzz
