// convert.h — moving values between Lua and C++: rendering a Lua value as readable Lua-literal
// text (the REPL's output) or as JSON (`--json`), copying plain data from one state to another,
// and small push helpers that API functions use to build result tables.
//
// Every conversion out of Lua reads raw — lua_next and lua_rawgeti, never a metamethod — so no Lua
// code runs while a value is converted, and is counted by a Meter (meter.h): it stops at the
// meter's value and byte limits, or at the running call's budget, with an error naming which.
#pragma once

#include <lua.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

#include "core/result.h"
#include "lua/meter.h"

namespace sal::lua {

struct RenderOptions {
  size_t max_depth = 8;        // deeper tables print as {…}
  size_t wrap = 72;            // tables longer than this on one line are printed one field a line
};

// Lua-literal text of the value at idx: strings quoted, tables as { a = 1, [2] = "x" } with keys
// sorted, cycles shown as <cycle>, functions as <function>. Metatables are not consulted.
Result<std::string> render(lua_State* L, int idx, Meter& meter, const RenderOptions& opts = {});

// The value at idx as Lua text for a message or a log line (the audit log's arguments, a failed
// check): at most `max_chars`, cut with "…"; a value whose text would pass a few times that is not
// walked further and shows as its type and "…".
std::string render_quote(lua_State* L, int idx, size_t max_chars);

// JSON of the value at idx: nil -> null, a table with keys 1..n -> array, other tables -> object
// (non-string keys as strings), an empty table -> [], NaN/inf -> null, functions -> "<function>".
Result<nlohmann::ordered_json> to_json(lua_State* L, int idx, Meter& meter, size_t max_depth = 16);

// Pushes a JSON value as a Lua value (arrays become 1-based sequences).
void push_json(lua_State* L, const nlohmann::ordered_json& v);

// Copies the plain value at `idx` of `from` onto the top of `to` (another state): nil, booleans,
// numbers, strings and tables of those, at most `max_depth` deep, counted by `meter` (which polls
// the budget of the call running in `to`: the copy allocates there, so it runs inside one —
// Sandbox::run). Functions, userdata, threads and cycles are refused with the path of the
// offending value. This is how a policy's save() state crosses into the next generation.
Status copy_value(lua_State* from, int idx, lua_State* to, Meter& meter, size_t max_depth = 32);

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
