// convert.cpp — see convert.h.
#include "lua/convert.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "core/strings.h"

namespace sal::lua {
namespace {

bool is_identifier(const std::string& s) {
  static const std::set<std::string> kKeywords = {
      "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
      "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"};
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '_') return false;
  return !kKeywords.count(s);
}

std::string quote_lua(const char* s, size_t n) {
  std::string out = "\"";
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\%d", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

std::string number_text(lua_Number x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "math.huge" : "-math.huge";
  if (x == std::floor(x) && std::fabs(x) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", x);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.14g", x);
  return buf;
}

// Length n if the table's keys are exactly 1..n (n may be 0), else -1; each key looked at is a
// step of the meter.
Result<long> sequence_length(lua_State* L, int t, Meter& meter) {
  long count = 0, max = 0;
  lua_pushnil(L);
  while (lua_next(L, t) != 0) {
    lua_pop(L, 1);
    if (auto s = meter.step(); !s) {
      lua_pop(L, 1);
      return s.error();
    }
    if (lua_type(L, -1) != LUA_TNUMBER) {
      lua_pop(L, 1);
      return -1L;
    }
    lua_Number k = lua_tonumber(L, -1);
    if (k < 1 || k != std::floor(k)) {
      lua_pop(L, 1);
      return -1L;
    }
    ++count;
    max = std::max(max, long(k));
  }
  return count == max ? max : -1L;
}

int absolute(lua_State* L, int idx) { return (idx > 0 || idx <= LUA_REGISTRYINDEX) ? idx : lua_gettop(L) + idx + 1; }

// Stack slots a conversion uses per level of nesting (a key, a value, a lookup), made sure of at
// each table it enters.
constexpr int kStackPerLevel = 4;

// Text bytes a table's layout adds per item beyond its key and value: ", " or ",\n", " = ", and
// in JSON the quotes and the colon; a line's indent is added to it. Counted with the item, so the
// meter's byte count bounds the finished text.
constexpr size_t kLayoutBytes = 5;

struct Renderer {
  lua_State* L;
  const RenderOptions& o;
  Meter& m;
  std::vector<const void*> stack;  // tables being rendered (cycle detection)

  std::string scalar(int idx) {
    switch (lua_type(L, idx)) {
      case LUA_TNIL: return "nil";
      case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? "true" : "false";
      case LUA_TNUMBER: return number_text(lua_tonumber(L, idx));
      case LUA_TSTRING: {
        size_t n = 0;
        const char* s = lua_tolstring(L, idx, &n);
        return quote_lua(s, n);
      }
      default: {
        char buf[64];
        std::snprintf(buf, sizeof buf, "<%s>", luaL_typename(L, idx));
        return buf;
      }
    }
  }

  // A string is measured before it is quoted: a 60 MB string stops at the byte limit uncopied.
  Result<std::string> counted_scalar(int idx, size_t indent) {
    if (lua_type(L, idx) == LUA_TSTRING) SAL_TRY(m.bytes(lua_objlen(L, idx)));
    std::string s = scalar(idx);
    SAL_TRY(m.bytes(s.size() + kLayoutBytes + indent));
    return s;
  }

  Result<std::string> key_text(int idx, size_t indent) {
    SAL_TRY(m.value());
    if (lua_type(L, idx) == LUA_TSTRING) {
      SAL_TRY(m.bytes(lua_objlen(L, idx)));
      std::string k = lua_tostring(L, idx);
      if (is_identifier(k)) return k;
    }
    auto s = counted_scalar(idx, indent);
    if (!s) return s.error();
    return "[" + *s + "]";
  }

  Result<std::vector<std::string>> sequence_items(int idx, long n, size_t depth, size_t indent) {
    std::vector<std::string> items;
    for (long i = 1; i <= n; ++i) {
      lua_rawgeti(L, idx, int(i));
      auto v = value(-1, depth + 1, indent + 2);
      lua_pop(L, 1);
      if (!v) return v.error();
      items.push_back(std::move(*v));
    }
    return items;
  }

  Result<std::vector<std::string>> keyed_items(int idx, size_t depth, size_t indent) {
    std::vector<std::pair<std::string, std::string>> kv;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
      auto k = key_text(-2, indent);
      if (!k) {
        lua_pop(L, 2);
        return k.error();
      }
      auto v = value(-1, depth + 1, indent + 2);
      lua_pop(L, 1);
      if (!v) {
        lua_pop(L, 1);
        return v.error();
      }
      kv.emplace_back(std::move(*k), std::move(*v));
    }
    std::sort(kv.begin(), kv.end());
    std::vector<std::string> items;
    for (auto& [k, v] : kv) items.push_back(k + " = " + v);
    return items;
  }

  std::string layout(const std::vector<std::string>& items, size_t indent) {
    if (items.empty()) return "{}";
    size_t len = 4;
    bool multiline_child = false;
    for (auto& it : items) {
      len += it.size() + 2;
      multiline_child |= it.find('\n') != std::string::npos;
    }
    if (len + indent <= o.wrap && !multiline_child) return "{ " + join(items, ", ") + " }";
    std::string pad(indent + 2, ' ');
    std::string out = "{\n";
    for (auto& it : items) out += pad + it + ",\n";
    return out + std::string(indent, ' ') + "}";
  }

  Result<std::string> value(int idx, size_t depth, size_t indent) {
    idx = absolute(L, idx);
    SAL_TRY(m.value());
    if (lua_type(L, idx) != LUA_TTABLE) return counted_scalar(idx, indent);
    const void* p = lua_topointer(L, idx);
    if (std::find(stack.begin(), stack.end(), p) != stack.end()) return std::string("<cycle>");
    if (depth >= o.max_depth) return std::string("{…}");
    if (!lua_checkstack(L, kStackPerLevel)) return fail(m.limits().what, " is nested too deep to convert");
    auto n = sequence_length(L, idx, m);
    if (!n) return n.error();
    stack.push_back(p);
    auto items = *n >= 0 ? sequence_items(idx, *n, depth, indent) : keyed_items(idx, depth, indent);
    stack.pop_back();
    if (!items) return items.error();
    return layout(*items, indent);
  }
};

using Json = nlohmann::ordered_json;

struct JsonWriter {
  lua_State* L;
  Meter& m;
  size_t max_depth;
  std::vector<const void*> stack;

  Result<Json> scalar(int idx) {
    switch (lua_type(L, idx)) {
      case LUA_TNIL: return Json(nullptr);
      case LUA_TBOOLEAN: return Json(bool(lua_toboolean(L, idx)));
      case LUA_TNUMBER: {
        SAL_TRY(m.bytes(kLayoutBytes));
        lua_Number x = lua_tonumber(L, idx);
        if (!std::isfinite(x)) return Json(nullptr);
        if (x == std::floor(x) && std::fabs(x) < 9.0e15) return Json(int64_t(x));
        return Json(x);
      }
      case LUA_TSTRING: {
        size_t n = 0;
        const char* s = lua_tolstring(L, idx, &n);
        SAL_TRY(m.bytes(n + kLayoutBytes));
        return Json(std::string(s, n));
      }
      default: return Json(std::string("<") + luaL_typename(L, idx) + ">");
    }
  }

  Result<std::string> key(int idx) {
    SAL_TRY(m.value());
    switch (lua_type(L, idx)) {
      case LUA_TSTRING: {
        SAL_TRY(m.bytes(lua_objlen(L, idx) + kLayoutBytes));
        return std::string(lua_tostring(L, idx));
      }
      case LUA_TNUMBER: return number_text(lua_tonumber(L, idx));
      default: return std::string("<") + luaL_typename(L, idx) + ">";
    }
  }

  Result<Json> array(int idx, long n, size_t depth) {
    Json out = Json::array();
    for (long i = 1; i <= n; ++i) {
      lua_rawgeti(L, idx, int(i));
      auto v = value(-1, depth + 1);
      lua_pop(L, 1);
      if (!v) return v.error();
      out.push_back(std::move(*v));
    }
    return out;
  }

  Result<Json> object(int idx, size_t depth) {
    std::vector<std::pair<std::string, Json>> kv;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
      auto k = key(-2);
      auto v = k ? value(-1, depth + 1) : Result<Json>(k.error());
      lua_pop(L, 1);
      if (!v) {
        lua_pop(L, 1);
        return v.error();
      }
      kv.emplace_back(std::move(*k), std::move(*v));
    }
    std::sort(kv.begin(), kv.end(), [](auto& a, auto& b) { return a.first < b.first; });
    Json out = Json::object();
    for (auto& [k, v] : kv) out[k] = std::move(v);
    return out;
  }

  Result<Json> value(int idx, size_t depth) {
    idx = absolute(L, idx);
    SAL_TRY(m.value());
    if (lua_type(L, idx) != LUA_TTABLE) return scalar(idx);
    const void* p = lua_topointer(L, idx);
    if (std::find(stack.begin(), stack.end(), p) != stack.end()) return Json("<cycle>");
    if (depth >= max_depth) return Json("<too deep>");
    if (!lua_checkstack(L, kStackPerLevel)) return fail(m.limits().what, " is nested too deep to convert");
    auto n = sequence_length(L, idx, m);
    if (!n) return n.error();
    stack.push_back(p);
    auto out = *n >= 0 ? array(idx, *n, depth) : object(idx, depth);
    stack.pop_back();
    return out;
  }
};

struct Copier {
  lua_State* from;
  lua_State* to;
  Meter& m;
  size_t max_depth;
  std::vector<const void*> stack;

  Status copy(int idx, size_t depth, const std::string& path) {
    idx = absolute(from, idx);
    SAL_TRY(m.value());
    switch (lua_type(from, idx)) {
      case LUA_TNIL: lua_pushnil(to); return {};
      case LUA_TBOOLEAN: lua_pushboolean(to, lua_toboolean(from, idx)); return {};
      case LUA_TNUMBER: lua_pushnumber(to, lua_tonumber(from, idx)); return {};
      case LUA_TSTRING: {
        size_t n = 0;
        const char* s = lua_tolstring(from, idx, &n);
        SAL_TRY(m.bytes(n));
        lua_pushlstring(to, s, n);
        return {};
      }
      case LUA_TTABLE: break;
      default: return fail(path, " is a ", luaL_typename(from, idx), " (only plain data can be saved)");
    }
    const void* p = lua_topointer(from, idx);
    if (std::find(stack.begin(), stack.end(), p) != stack.end()) return fail(path, " refers back to itself");
    if (depth >= max_depth) return fail(path, " is nested deeper than ", max_depth);
    if (!lua_checkstack(from, kStackPerLevel) || !lua_checkstack(to, kStackPerLevel))
      return fail(path, " is nested too deep to copy");
    stack.push_back(p);
    lua_newtable(to);
    lua_pushnil(from);
    while (lua_next(from, idx) != 0) {
      std::string key = lua_type(from, -2) == LUA_TSTRING ? std::string(lua_tostring(from, -2))
                                                          : "[" + number_text(lua_tonumber(from, -2)) + "]";
      if (auto s = copy(-2, depth + 1, path + "." + key); !s) {
        lua_pop(from, 2);
        lua_pop(to, 1);
        return s;
      }
      if (auto s = copy(-1, depth + 1, path + "." + key); !s) {
        lua_pop(from, 2);
        lua_pop(to, 2);
        return s;
      }
      lua_rawset(to, -3);
      lua_pop(from, 1);
    }
    stack.pop_back();
    return {};
  }
};

}  // namespace

Status copy_value(lua_State* from, int idx, lua_State* to, Meter& meter, size_t max_depth) {
  Copier c{from, to, meter, max_depth, {}};
  return c.copy(idx, 0, "state");
}

Result<std::string> render(lua_State* L, int idx, Meter& meter, const RenderOptions& opts) {
  Renderer r{L, opts, meter, {}};
  auto s = r.value(idx, 0, 0);
  if (s) SAL_TRY(meter.check_total(s->size()));
  return s;
}

std::string render_quote(lua_State* L, int idx, size_t max_chars) {
  // A quote walks at most this many times the characters it shows (a value per few characters).
  constexpr size_t kQuoteWalk = 4;
  MeterLimits limits{.what = "the quoted value",
                     .values = {kQuoteWalk * max_chars, "a quote's length"},
                     .bytes = {kQuoteWalk * max_chars, "a quote's length"}};
  Meter m(L, limits);
  auto text = render(L, idx, m);
  if (!text) return std::string("<") + luaL_typename(L, idx) + " …>";
  return clip(*text, max_chars);
}

Result<nlohmann::ordered_json> to_json(lua_State* L, int idx, Meter& meter, size_t max_depth) {
  JsonWriter w{L, meter, max_depth, {}};
  return w.value(idx, 0);
}

void push_json(lua_State* L, const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: lua_pushnil(L); break;
    case nlohmann::json::value_t::boolean: lua_pushboolean(L, v.get<bool>()); break;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: lua_pushnumber(L, v.get<double>()); break;
    case nlohmann::json::value_t::number_float: lua_pushnumber(L, v.get<double>()); break;
    case nlohmann::json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      break;
    }
    case nlohmann::json::value_t::array: {
      lua_createtable(L, int(v.size()), 0);
      int i = 1;
      for (const auto& x : v) {
        push_json(L, x);
        lua_rawseti(L, -2, i++);
      }
      break;
    }
    case nlohmann::json::value_t::object: {
      lua_createtable(L, 0, int(v.size()));
      for (auto it = v.begin(); it != v.end(); ++it) {
        push_json(L, it.value());
        lua_setfield(L, -2, it.key().c_str());
      }
      break;
    }
    default: lua_pushnil(L);
  }
}

void set_field(lua_State* L, const char* key, int64_t v) {
  lua_pushnumber(L, lua_Number(v));
  lua_setfield(L, -2, key);
}
void set_field(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}
void set_field(lua_State* L, const char* key, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, key);
}
void set_field(lua_State* L, const char* key, const char* v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, key);
}
void set_field(lua_State* L, const char* key, bool v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, key);
}

int64_t check_integer(lua_State* L, int idx, const char* fn, const char* what) {
  if (lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "%s: argument %d must be %s (an integer), got %s", fn, idx, what,
               luaL_typename(L, idx));
  lua_Number x = lua_tonumber(L, idx);
  // (inf and NaN are no integers; beyond 2^53 a double no longer holds every integer)
  if (!std::isfinite(x) || x != std::floor(x) || std::fabs(x) > 9007199254740992.0)
    luaL_error(L, "%s: argument %d must be %s (an integer), got %g", fn, idx, what, x);
  return int64_t(x);
}

std::string check_string(lua_State* L, int idx, const char* fn, const char* what) {
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "%s: argument %d must be %s (a string), got %s", fn, idx, what,
               luaL_typename(L, idx));
  size_t n = 0;
  const char* s = lua_tolstring(L, idx, &n);
  return std::string(s, n);
}

}  // namespace sal::lua
