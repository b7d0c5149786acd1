// lua_io.h — moving decision inputs into Lua and proposals out of it. Reading is strict: every
// value is checked for type and range and an error names its path in the proposal
// ("replicas[2][5]: expected an integer >= 1, got -1"). Lua sees 1-based indices; `shift`
// converts ids (experts, nodes, operators, shard types) between 0-based C++ and 1-based Lua.
#pragma once

#include <lua.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

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

// Reading. `idx` is an absolute stack index; values are converted by subtracting `shift` and must
// lie in [lo, hi] before the shift.
Result<uint32_t> read_uint(lua_State* L, int idx, const std::string& path, uint32_t lo, uint32_t hi);
Result<std::vector<uint32_t>> read_uints(lua_State* L, int idx, const std::string& path, uint32_t lo,
                                         uint32_t hi, uint32_t shift = 0);
Result<std::vector<std::vector<uint32_t>>> read_uints2(lua_State* L, int idx, const std::string& path,
                                                       uint32_t lo, uint32_t hi, uint32_t shift = 0);
Result<std::vector<std::vector<std::vector<uint32_t>>>> read_uints3(lua_State* L, int idx,
                                                                    const std::string& path, uint32_t lo,
                                                                    uint32_t hi, uint32_t shift = 0);
Result<std::vector<std::vector<double>>> read_numbers2(lua_State* L, int idx, const std::string& path);
// A field of the table at idx: an integer in [lo, hi] (required), or a number >= 0 (default when absent).
Result<uint32_t> read_field_uint(lua_State* L, int idx, const char* key, uint32_t lo, uint32_t hi);
Result<double> read_field_number(lua_State* L, int idx, const char* key, const std::string& where, double fallback);
Result<std::vector<bool>> read_bools(lua_State* L, int idx, const std::string& path);

// The field `key` of the table at idx, pushed (nil if absent); returns its absolute index.
int field(lua_State* L, int idx, const char* key);
// Length of a sequence (1..n without holes); -1 if the value is not such a table.
int sequence_length(lua_State* L, int idx);
// Errors when the table at idx has keys other than `allowed` (catches typos in proposals).
Status only_keys(lua_State* L, int idx, const std::vector<std::string>& allowed, const std::string& what);

}  // namespace sal::policy::lua_io
