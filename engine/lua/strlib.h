// strlib.h — the library functions whose cost is not linear in their input, replaced in every
// sandbox by versions that honour the call's budget.
//
// The instruction hook stops Lua code, but a C library function runs no instruction while it
// works: LuaJIT's pattern matcher backtracks exponentially on ('a?'):rep(n)..('a'):rep(n), a plain
// find is O(n·m), and sort is O(n log n) comparisons in C. Here string.find, match, gmatch and gsub
// use pattern.h's matcher (same results and errors as LuaJIT's, plain finds through memmem, which
// is linear), and table.sort without a Lua comparator is a heap sort — each polls budget_poll()
// every few thousand steps and stops with the budget's error. table.sort with a Lua comparator
// keeps LuaJIT's own sort: its comparisons are Lua code, which the hook stops, and the order of
// tied elements stays exactly what policies have always seen.
#pragma once

#include <lua.hpp>

namespace sal::lua {

// Replaces the functions above in the state's string and table libraries (already opened).
void install_bounded_library(lua_State* L);

}  // namespace sal::lua
