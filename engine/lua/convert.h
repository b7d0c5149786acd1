// convert.h — moving values between Lua and C++: rendering a Lua value as readable Lua-literal
// text (the REPL's output) or as JSON (`--json`), and small push helpers that API functions use
// to build result tables.
#pragma once

#include <lua.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

#include "core/result.h"

namespace sal::lua {

struct RenderOptions {
  size_t max_depth = 8;        // deeper tables print as {…}
  size_t max_bytes = 1u << 20; // output is cut with "… (truncated)" beyond this
  size_t wrap = 72;            // tables longer than this on one line are printed one field a line
};

// Lua-literal text of the value at idx: strings quoted, tables as { a = 1, [2] = "x" } with keys
// sorted, cycles shown as <cycle>, functions as <function>.
std::string render(lua_State* L, int idx, const RenderOptions& opts = {});

// JSON of the value at idx: nil -> null, a table with keys 1..n -> array, other tables -> object
// (non-string keys as strings), an empty table -> [], NaN/inf -> null, functions -> "<function>".
nlohmann::ordered_json to_json(lua_State* L, int idx, size_t max_depth = 16);

// Pushes a JSON value as a Lua value (arrays become 1-based sequences).
void push_json(lua_State* L, const nlohmann::ordered_json& v);

// Copies the plain value at `idx` of `from` onto the top of `to` (another state): nil, booleans,
// numbers, strings and tables of those, at most `max_depth` deep and `max_items` values in all.
// Functions, userdata, threads and cycles are refused with the path of the offending value.
// This is how a policy's save() state crosses into the next generation.
Status copy_value(lua_State* from, int idx, lua_State* to, size_t max_depth = 32, size_t max_items = 1u << 20);

// Setters for the table at the top of the stack.
void set_field(lua_State* L, const char* key, int64_t v);
void set_field(lua_State* L, const char* key, double v);
void set_field(lua_State* L, const char* key, const std::string& v);
void set_field(lua_State* L, const char* key, const char* v);
void set_field(lua_State* L, const char* key, bool v);

// Argument checks that name the function: "job.kill: argument 1 must be a node id (integer)".
int64_t check_integer(lua_State* L, int idx, const char* fn, const char* what);
std::string check_string(lua_State* L, int idx, const char* fn, const char* what);

}  // namespace sal::lua
