// lua_io.h — moving decision inputs into Lua and proposals out of it. Reading is strict: every
// value is checked for type and range and an error names its path in the proposal
// ("replicas[2][5]: expected an integer >= 1, got -1"). Lua sees 1-based indices; `shift`
// converts ids (experts, nodes, operators, shard types) between 0-based C++ and 1-based Lua.
//
// Reading runs no Lua code: fields are read raw, and a table with a metatable is refused (a
// proposal is plain data; its metamethods would be code run by the reader). Lists are counted by
// a Meter (lua/meter.h) — a list shared a thousand times is read a thousand times, so the count,
// not the Lua memory, bounds what the C++ copy holds — which also polls the running call's budget.
#pragma once

#include <lua.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "lua/meter.h"

namespace sal::policy::lua_io {

// Pushing (each leaves one value on the stack).
void push_numbers(lua_State* L, const std::vector<double>& v);
void push_uints(lua_State* L, const std::vector<uint32_t>& v, uint32_t shift = 0);
void push_uints2(lua_State* L, const std::vector<std::vector<uint32_t>>& v, uint32_t shift = 0);
void push_uints3(lua_State* L, const std::vector<std::vector<std::vector<uint32_t>>>& v, uint32_t shift = 0);
void push_numbers2(lua_State* L, const std::vector<std::vector<double>>& v);
void push_bools(lua_State* L, const std::vector<bool>& v);
void set_number(lua_State* L, const char* key, double v);   // on the table at the top
void set_string(lua_State* L, const char* key, const std::string& v);

// What reading `what` from L may cost: values at kReadValueCost bytes each (what the C++ copy
// holds per value, list overhead included) within the state's memory cap — so the copy is never
// larger than the cap of the state it was read from.
constexpr size_t kReadValueCost = 16;
lua::MeterLimits read_limits(lua_State* L, const std::string& what);

// Reading. `idx` is an absolute stack index; values are converted by subtracting `shift` and must
// lie in [lo, hi] before the shift. Lists count their values on `m`.
Result<uint32_t> read_uint(lua_State* L, int idx, const std::string& path, uint32_t lo, uint32_t hi);
Result<std::vector<uint32_t>> read_uints(lua_State* L, lua::Meter& m, int idx, const std::string& path, uint32_t lo,
                                         uint32_t hi, uint32_t shift = 0);
Result<std::vector<std::vector<uint32_t>>> read_uints2(lua_State* L, lua::Meter& m, int idx, const std::string& path,
                                                       uint32_t lo, uint32_t hi, uint32_t shift = 0);
Result<std::vector<std::vector<std::vector<uint32_t>>>> read_uints3(lua_State* L, lua::Meter& m, int idx,
                                                                    const std::string& path, uint32_t lo,
                                                                    uint32_t hi, uint32_t shift = 0);
Result<std::vector<double>> read_numbers(lua_State* L, lua::Meter& m, int idx, const std::string& path);
Result<std::vector<std::vector<double>>> read_numbers2(lua_State* L, lua::Meter& m, int idx, const std::string& path);
Result<std::vector<bool>> read_bools(lua_State* L, lua::Meter& m, int idx, const std::string& path);
// A field of the table at idx: an integer in [lo, hi] (required), or a number >= 0 (default when absent).
Result<uint32_t> read_field_uint(lua_State* L, int idx, const char* key, uint32_t lo, uint32_t hi);
Result<double> read_field_number(lua_State* L, int idx, const char* key, const std::string& where, double fallback);
// A string field (raw), cut at `max_chars` (clip), or `fallback` when the field is not a string.
std::string read_field_string(lua_State* L, int idx, const char* key, const std::string& fallback, size_t max_chars);

// The field `key` of the table at idx, read raw and pushed (nil if absent); returns its absolute index.
int field(lua_State* L, int idx, const char* key);
// Length of a sequence (1..n without holes); -1 if the value is not such a table.
int sequence_length(lua_State* L, int idx);
// An error naming `path` when the table at idx has a metatable.
Status plain_table(lua_State* L, int idx, const std::string& path);
// Errors when the table at idx has keys other than `allowed` (catches typos in proposals), or has a
// metatable.
Status only_keys(lua_State* L, int idx, const std::vector<std::string>& allowed, const std::string& what);

}  // namespace sal::policy::lua_io
