// lua_io.cpp — see lua_io.h.
#include "policy/lua_io.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "lua/sandbox.h"

namespace sal::policy::lua_io {
namespace {

std::string type_text(lua_State* L, int idx) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.14g", lua_tonumber(L, idx));
    return buf;
  }
  return std::string("a ") + luaL_typename(L, idx);
}

template <class T, class Push>
void push_list(lua_State* L, const std::vector<T>& v, Push push) {
  lua_createtable(L, int(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    push(v[i]);
    lua_rawseti(L, -2, int(i + 1));
  }
}

// Reads a sequence at idx, calling read_item(abs index of item, path of item) for each element.
template <class T, class ReadItem>
Result<std::vector<T>> read_list(lua_State* L, lua::Meter& m, int idx, const std::string& path, ReadItem read_item) {
  int n = sequence_length(L, idx);
  if (n < 0) return fail(path, ": expected a list, got ", type_text(L, idx));
  SAL_TRY(plain_table(L, idx, path));
  std::vector<T> out;
  for (int i = 1; i <= n; ++i) {
    if (auto s = m.value(); !s) return s.error().with_context(path);
    if (i == 1) out.reserve(size_t(n));  // once the first value is allowed: a list is counted before it is held
    lua_rawgeti(L, idx, i);
    auto item = read_item(lua_gettop(L), path + "[" + std::to_string(i) + "]");
    lua_pop(L, 1);
    if (!item) return item.error();
    out.push_back(std::move(*item));
  }
  return out;
}

}  // namespace

void push_numbers(lua_State* L, const std::vector<double>& v) {
  push_list(L, v, [L](double x) { lua_pushnumber(L, x); });
}
void push_uints(lua_State* L, const std::vector<uint32_t>& v, uint32_t shift) {
  push_list(L, v, [L, shift](uint32_t x) { lua_pushnumber(L, double(x) + shift); });
}
void push_uints2(lua_State* L, const std::vector<std::vector<uint32_t>>& v, uint32_t shift) {
  push_list(L, v, [L, shift](const std::vector<uint32_t>& x) { push_uints(L, x, shift); });
}
void push_uints3(lua_State* L, const std::vector<std::vector<std::vector<uint32_t>>>& v, uint32_t shift) {
  push_list(L, v, [L, shift](const std::vector<std::vector<uint32_t>>& x) { push_uints2(L, x, shift); });
}
void push_numbers2(lua_State* L, const std::vector<std::vector<double>>& v) {
  push_list(L, v, [L](const std::vector<double>& x) { push_numbers(L, x); });
}
void push_bools(lua_State* L, const std::vector<bool>& v) {
  lua_createtable(L, int(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushboolean(L, v[i]);
    lua_rawseti(L, -2, int(i + 1));
  }
}
void set_number(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}
void set_string(lua_State* L, const char* key, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, key);
}

int sequence_length(lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return -1;
  int n = int(lua_objlen(L, idx));
  int count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    ++count;
    if (lua_type(L, -1) != LUA_TNUMBER) {
      lua_pop(L, 1);
      return -1;
    }
  }
  return count == n ? n : -1;
}

lua::MeterLimits read_limits(lua_State* L, const std::string& what) {
  size_t cap = lua::Sandbox::memory_cap(L);
  lua::MeterLimits l;
  l.what = what;
  l.values = {cap / kReadValueCost, "the memory cap of " + std::to_string(cap >> 20) + " MiB allows no more"};
  return l;
}

int field(lua_State* L, int idx, const char* key) {
  lua_pushstring(L, key);
  lua_rawget(L, idx);
  return lua_gettop(L);
}

std::string read_field_string(lua_State* L, int idx, const char* key, const std::string& fallback, size_t max_chars) {
  int f = field(L, idx, key);
  size_t n = 0;
  const char* s = lua_type(L, f) == LUA_TSTRING ? lua_tolstring(L, f, &n) : nullptr;
  std::string out = s ? clip(std::string_view(s, n), max_chars) : fallback;
  lua_pop(L, 1);
  return out;
}

Status plain_table(lua_State* L, int idx, const std::string& path) {
  if (!lua_getmetatable(L, idx)) return {};
  lua_pop(L, 1);
  return fail(path, ": a table with a metatable; a proposal is plain data (tables, numbers, strings, "
              "booleans), read without metamethods");
}

Status only_keys(lua_State* L, int idx, const std::vector<std::string>& allowed, const std::string& what) {
  SAL_TRY(plain_table(L, idx, what));
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    std::string key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : type_text(L, -1);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      lua_pop(L, 1);
      return fail(what, ": unknown field '", key, "'", did_you_mean(key, allowed), " (expected ",
                  join(allowed, ", "), ")");
    }
  }
  return {};
}

Result<uint32_t> read_uint(lua_State* L, int idx, const std::string& path, uint32_t lo, uint32_t hi) {
  double x = lua_tonumber(L, idx);
  if (lua_type(L, idx) != LUA_TNUMBER || x != std::floor(x) || x < lo || x > hi)
    return fail(path, ": expected an integer in [", lo, ", ", hi, "], got ", type_text(L, idx));
  return uint32_t(x);
}

Result<std::vector<uint32_t>> read_uints(lua_State* L, lua::Meter& m, int idx, const std::string& path, uint32_t lo,
                                         uint32_t hi, uint32_t shift) {
  return read_list<uint32_t>(L, m, idx, path, [&](int i, const std::string& p) -> Result<uint32_t> {
    auto v = read_uint(L, i, p, lo, hi);
    if (!v) return v.error();
    return *v - shift;
  });
}

Result<std::vector<std::vector<uint32_t>>> read_uints2(lua_State* L, lua::Meter& m, int idx, const std::string& path,
                                                       uint32_t lo, uint32_t hi, uint32_t shift) {
  return read_list<std::vector<uint32_t>>(
      L, m, idx, path, [&](int i, const std::string& p) { return read_uints(L, m, i, p, lo, hi, shift); });
}

Result<std::vector<std::vector<std::vector<uint32_t>>>> read_uints3(lua_State* L, lua::Meter& m, int idx,
                                                                    const std::string& path, uint32_t lo,
                                                                    uint32_t hi, uint32_t shift) {
  return read_list<std::vector<std::vector<uint32_t>>>(
      L, m, idx, path, [&](int i, const std::string& p) { return read_uints2(L, m, i, p, lo, hi, shift); });
}

Result<std::vector<double>> read_numbers(lua_State* L, lua::Meter& m, int idx, const std::string& path) {
  return read_list<double>(L, m, idx, path, [&](int j, const std::string& q) -> Result<double> {
    if (lua_type(L, j) != LUA_TNUMBER || !std::isfinite(lua_tonumber(L, j)) || lua_tonumber(L, j) < 0)
      return fail(q, ": expected a number >= 0, got ", type_text(L, j));
    return double(lua_tonumber(L, j));
  });
}

Result<std::vector<std::vector<double>>> read_numbers2(lua_State* L, lua::Meter& m, int idx, const std::string& path) {
  return read_list<std::vector<double>>(L, m, idx, path,
                                        [&](int i, const std::string& p) { return read_numbers(L, m, i, p); });
}

Result<uint32_t> read_field_uint(lua_State* L, int idx, const char* key, uint32_t lo, uint32_t hi) {
  int f = field(L, idx, key);
  auto v = read_uint(L, f, key, lo, hi);
  lua_pop(L, 1);
  return v;
}

Result<double> read_field_number(lua_State* L, int idx, const char* key, const std::string& where, double fallback) {
  int f = field(L, idx, key);
  double x = lua_tonumber(L, f);
  int t = lua_type(L, f);
  std::string got = t == LUA_TNIL ? "" : type_text(L, f);
  lua_pop(L, 1);
  if (t == LUA_TNIL) return fallback;
  if (t != LUA_TNUMBER || !std::isfinite(x) || x < 0) return fail(where, ".", key, ": expected a number >= 0, got ", got);
  return x;
}

Result<std::vector<bool>> read_bools(lua_State* L, lua::Meter& m, int idx, const std::string& path) {
  return read_list<bool>(L, m, idx, path, [&](int i, const std::string& p) -> Result<bool> {
    if (lua_type(L, i) != LUA_TBOOLEAN) return fail(p, ": expected true or false, got ", type_text(L, i));
    return bool(lua_toboolean(L, i));
  });
}

}  // namespace sal::policy::lua_io
