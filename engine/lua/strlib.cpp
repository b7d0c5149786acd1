// strlib.cpp — see strlib.h. The bindings read their arguments as LuaJIT's string library does (a
// negative init counts from the end, an init past the end clamps to it, gsub's count defaults to
// one more than the subject's length), and raise LuaJIT's messages for malformed patterns. No C++
// object with a destructor is alive when they raise.
#include "lua/strlib.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "lua/pattern.h"
#include "lua/sandbox.h"

namespace sal::lua {
namespace {

using pattern::Matcher;
using pattern::Stop;

bool poll(void* ctx) { return budget_poll(static_cast<lua_State*>(ctx)); }

// A plain search: memchr for the first byte and a comparison, as LuaJIT does, while that stays
// cheap; once the comparisons have cost a few times the subject's length (a needle like "aaa…b" in
// "aaaa…"), the rest goes to memmem, which is linear. Linear either way.
const char* plain_find(const char* s, size_t n, const char* p, size_t m) {
  if (m == 0) return s;
  if (m > n) return nullptr;
  const char* last = s + (n - m);
  size_t allowance = 4 * n + 4096;
  for (const char* q = s; q <= last; ++q) {
    q = static_cast<const char*>(std::memchr(q, p[0], size_t(last - q) + 1));
    if (!q) return nullptr;
    size_t k = 1;
    while (k < m && q[k] == p[k]) ++k;
    if (k == m) return q;
    if (k > allowance) return static_cast<const char*>(memmem(q, size_t(s + n - q), p, m));
    allowance -= k;
  }
  return nullptr;
}

// Raises why the matcher stopped (a malformed pattern, or the budget).
int raise_stop(lua_State* L, const Matcher& m) {
  if (m.stop() == Stop::budget) return budget_raise(L);
  return luaL_error(L, "%s", m.error());
}

// Pushes capture i of the match s..e (the whole match when the pattern has none); false if the
// matcher refused it (the error is in m).
bool push_capture(lua_State* L, Matcher& m, int i, const char* s, const char* e) {
  if (!m.check_capture_for_result(i)) return false;
  if (i >= m.levels()) {
    lua_pushlstring(L, s, size_t(e - s));
    return true;
  }
  const pattern::Capture& c = m.capture(i);
  if (c.len == pattern::kPosition) {
    lua_pushinteger(L, lua_Integer(c.init - m.src_begin() + 1));
  } else {
    lua_pushlstring(L, c.init, size_t(c.len));
  }
  return true;
}

// Pushes every capture (or the whole match when there are none and s is given); returns how many,
// or -1 when a capture is unfinished.
int push_captures(lua_State* L, Matcher& m, const char* s, const char* e) {
  int n = (m.levels() == 0 && s) ? 1 : m.levels();
  luaL_checkstack(L, n, "too many captures");
  for (int i = 0; i < n; ++i)
    if (!push_capture(L, m, i, s, e)) return -1;
  return n;
}

// Zero-based start for an `init` argument, clamped to [0, len].
size_t start_of(lua_State* L, int idx, size_t len) {
  lua_Integer init = luaL_optinteger(L, idx, 1);
  if (init < 0) {
    init += lua_Integer(len);
  } else {
    --init;
  }
  if (init < 0) init = 0;
  return size_t(init) > len ? len : size_t(init);
}

int find_or_match(lua_State* L, bool find) {
  size_t ls = 0, lp = 0;
  const char* s = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  size_t start = start_of(L, 3, ls);
  if (find && (lua_toboolean(L, 4) || pattern::is_plain({p, lp}))) {
    const char* q = plain_find(s + start, ls - start, p, lp);
    if (!q) {
      lua_pushnil(L);
      return 1;
    }
    size_t at = size_t(q - s);
    lua_pushinteger(L, lua_Integer(at + 1));
    lua_pushinteger(L, lua_Integer(at + lp));
    return 2;
  }
  Matcher m({s, ls}, {p, lp}, poll, L);
  bool anchor = lp > 0 && p[0] == '^';
  size_t p_off = anchor ? 1 : 0;
  int first = anchor ? -1 : m.first_byte(p_off);
  const char* src = s + start;
  do {
    src = m.next_start(src, first);
    if (!src) break;
    const char* e = m.match_at(src, p_off);
    if (e) {
      int n;
      if (find) {
        lua_pushinteger(L, lua_Integer(src - s + 1));
        lua_pushinteger(L, lua_Integer(e - s));
        n = push_captures(L, m, nullptr, nullptr);
        if (n >= 0) return n + 2;
      } else {
        n = push_captures(L, m, src, e);
        if (n >= 0) return n;
      }
      return raise_stop(L, m);
    }
    if (m.stop() != Stop::none) return raise_stop(L, m);
  } while (src++ < m.src_end() && !anchor);
  lua_pushnil(L);
  return 1;
}

int str_find(lua_State* L) { return find_or_match(L, true); }
int str_match(lua_State* L) { return find_or_match(L, false); }

// gmatch's iterator: upvalues subject, pattern, next position (zero-based).
int gmatch_next(lua_State* L) {
  size_t ls = 0, lp = 0;
  const char* s = lua_tolstring(L, lua_upvalueindex(1), &ls);
  const char* p = lua_tolstring(L, lua_upvalueindex(2), &lp);
  size_t pos = size_t(lua_tointeger(L, lua_upvalueindex(3)));
  Matcher m({s, ls}, {p, lp}, poll, L);
  int first = m.first_byte(0);
  for (const char* src = s + pos; src <= m.src_end(); ++src) {
    src = m.next_start(src, first);
    if (!src) break;
    const char* e = m.match_at(src);
    if (e) {
      size_t next = size_t(e - s) + (e == src ? 1 : 0);  // an empty match still moves on
      lua_pushinteger(L, lua_Integer(next));
      lua_replace(L, lua_upvalueindex(3));
      int n = push_captures(L, m, src, e);
      if (n >= 0) return n;
      return raise_stop(L, m);
    }
    if (m.stop() != Stop::none) return raise_stop(L, m);
  }
  return 0;
}

int str_gmatch(lua_State* L) {
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  lua_settop(L, 2);
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, gmatch_next, 3);
  return 1;
}

// Appends the replacement string (argument 3) for the match s..e: %0 is the match, %1..%9 its
// captures, % before anything else is that character. False if a capture index is invalid.
bool add_template(lua_State* L, luaL_Buffer* b, Matcher& m, const char* s, const char* e) {
  size_t l = 0;
  const char* r = lua_tolstring(L, 3, &l);
  for (size_t i = 0; i < l; ++i) {
    if (r[i] != '%') {
      luaL_addchar(b, r[i]);
      continue;
    }
    ++i;
    char d = i < l ? r[i] : '\0';  // a trailing % adds the string's terminator, as LuaJIT does
    if (d < '0' || d > '9') {
      luaL_addchar(b, d);
    } else if (d == '0') {
      luaL_addlstring(b, s, size_t(e - s));
    } else {
      if (!push_capture(L, m, d - '1', s, e)) return false;
      luaL_addvalue(b);
    }
  }
  return true;
}

// Appends what replaces the match s..e; false if the matcher refused a capture.
bool add_replacement(lua_State* L, luaL_Buffer* b, Matcher& m, const char* s, const char* e) {
  switch (lua_type(L, 3)) {
    case LUA_TFUNCTION: {
      lua_pushvalue(L, 3);
      int n = push_captures(L, m, s, e);
      if (n < 0) return false;
      lua_call(L, n, 1);
      break;
    }
    case LUA_TTABLE:
      if (!push_capture(L, m, 0, s, e)) return false;
      lua_gettable(L, 3);
      break;
    default:
      return add_template(L, b, m, s, e);
  }
  if (!lua_toboolean(L, -1)) {
    lua_pop(L, 1);
    lua_pushlstring(L, s, size_t(e - s));  // nil or false keeps the match
  } else if (!lua_isstring(L, -1)) {
    return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1)), false;
  }
  luaL_addvalue(b);
  return true;
}

int str_gsub(lua_State* L) {
  size_t ls = 0, lp = 0;
  const char* s = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  int tr = lua_type(L, 3);
  lua_Integer max_n = luaL_optinteger(L, 4, lua_Integer(ls + 1));
  if (tr != LUA_TNUMBER && tr != LUA_TSTRING && tr != LUA_TFUNCTION && tr != LUA_TTABLE)
    return luaL_argerror(L, 3, "string/function/table expected");
  bool anchor = lp > 0 && p[0] == '^';
  size_t p_off = anchor ? 1 : 0;
  Matcher m({s, ls}, {p, lp}, poll, L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  const char* src = s;
  lua_Integer n = 0;
  int first = anchor ? -1 : m.first_byte(p_off);
  while (n < max_n) {
    const char* next = m.next_start(src, first);  // no match can start before it: copy up to it
    if (!next) break;
    luaL_addlstring(&b, src, size_t(next - src));
    src = next;
    const char* e = m.match_at(src, p_off);
    if (m.stop() != Stop::none) return raise_stop(L, m);
    if (e) {
      ++n;
      if (!add_replacement(L, &b, m, src, e)) return raise_stop(L, m);
    }
    if (e && e > src) {
      src = e;
    } else if (src < m.src_end()) {
      luaL_addchar(&b, *src++);
    } else {
      break;
    }
    if (anchor) break;
  }
  luaL_addlstring(&b, src, size_t(m.src_end() - src));
  luaL_pushresult(&b);
  lua_pushinteger(L, n);
  return 2;
}

// ---- table.sort ----

// The array part of argument 1, sorted in place by argument 2 (a C function) or by `<`, as a heap
// sort that polls the budget every few thousand comparisons.
class HeapSort {
 public:
  HeapSort(lua_State* L, bool has_comparator) : L_(L), comparator_(has_comparator) {}

  void run(int n) {
    for (int i = n / 2; i >= 1; --i) sift_down(i, n);
    for (int end = n; end > 1; --end) {
      swap(1, end);
      sift_down(1, end - 1);
    }
  }

 private:
  bool less(int i, int j) {
    if (++comparisons_ % 4096 == 0 && !budget_poll(L_)) budget_raise(L_);
    if (comparator_) {
      lua_pushvalue(L_, 2);
      lua_rawgeti(L_, 1, i);
      lua_rawgeti(L_, 1, j);
      lua_call(L_, 2, 1);
    } else {
      lua_rawgeti(L_, 1, i);
      lua_rawgeti(L_, 1, j);
      lua_pushboolean(L_, lua_lessthan(L_, -2, -1));
      lua_remove(L_, -2);
      lua_remove(L_, -2);
    }
    bool r = lua_toboolean(L_, -1);
    lua_pop(L_, 1);
    return r;
  }

  void swap(int i, int j) {
    lua_rawgeti(L_, 1, i);
    lua_rawgeti(L_, 1, j);
    lua_rawseti(L_, 1, i);
    lua_rawseti(L_, 1, j);
  }

  void sift_down(int root, int n) {
    for (;;) {
      int child = 2 * root;
      if (child > n) return;
      if (child < n && less(child, child + 1)) ++child;
      if (!less(root, child)) return;
      swap(root, child);
      root = child;
    }
  }

  lua_State* L_;
  bool comparator_;
  uint64_t comparisons_ = 0;
};

// Arrays of numbers (no NaN) or of strings alone, without a comparator, are sorted as C++ values:
// std::sort on blocks, then merge passes, polling the budget after each; then written back (with
// the collector stopped, as the strings are re-pushed from views of themselves — interned, so the
// very same strings). For these, any correct sort gives LuaJIT's order: equal values are the same
// value. The budget is polled while reading and sorting; the write-back, linear and short, always
// completes, so a stopped sort leaves the array as it was, never half written.
constexpr size_t kSortBlock = size_t(1) << 14;

template <class T>
bool merge_sorted(lua_State* L, std::vector<T>& v) {
  for (size_t i = 0; i < v.size(); i += kSortBlock) {
    std::sort(v.begin() + ptrdiff_t(i), v.begin() + ptrdiff_t(std::min(v.size(), i + kSortBlock)));
    if (!budget_poll(L)) return false;
  }
  std::vector<T> out(v.size());
  for (size_t width = kSortBlock; width < v.size(); width *= 2) {
    for (size_t lo = 0; lo < v.size(); lo += 2 * width) {
      size_t mid = std::min(lo + width, v.size()), hi = std::min(lo + 2 * width, v.size());
      std::merge(v.begin() + ptrdiff_t(lo), v.begin() + ptrdiff_t(mid), v.begin() + ptrdiff_t(mid),
                 v.begin() + ptrdiff_t(hi), out.begin() + ptrdiff_t(lo));
      if (!budget_poll(L)) return false;
    }
    v.swap(out);
  }
  return true;
}

enum class FastSort { done, not_applicable, stopped };

FastSort sort_plain_values(lua_State* L, int n) {
  if (n < 2) return FastSort::done;
  lua_rawgeti(L, 1, 1);
  int type = lua_type(L, -1);
  lua_pop(L, 1);
  if (type == LUA_TNUMBER) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L, 1, i);
      bool number = lua_type(L, -1) == LUA_TNUMBER;
      v[size_t(i - 1)] = lua_tonumber(L, -1);
      lua_pop(L, 1);
      if (!number || v[size_t(i - 1)] != v[size_t(i - 1)]) return FastSort::not_applicable;  // NaN too
      if (i % kSortBlock == 0 && !budget_poll(L)) return FastSort::stopped;
    }
    if (!merge_sorted(L, v)) return FastSort::stopped;
    for (int i = 1; i <= n; ++i) {
      lua_pushnumber(L, v[size_t(i - 1)]);
      lua_rawseti(L, 1, i);
    }
    return FastSort::done;
  }
  if (type != LUA_TSTRING) return FastSort::not_applicable;
  std::vector<std::string_view> v(static_cast<size_t>(n));
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, 1, i);
    size_t len = 0;
    const char* s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : nullptr;
    lua_pop(L, 1);  // the table keeps the string alive
    if (!s) return FastSort::not_applicable;
    v[size_t(i - 1)] = {s, len};
    if (i % kSortBlock == 0 && !budget_poll(L)) return FastSort::stopped;
  }
  if (!merge_sorted(L, v)) return FastSort::stopped;
  lua_gc(L, LUA_GCSTOP, 0);
  for (int i = 1; i <= n; ++i) {
    lua_pushlstring(L, v[size_t(i - 1)].data(), v[size_t(i - 1)].size());
    lua_rawseti(L, 1, i);
  }
  lua_gc(L, LUA_GCRESTART, 0);
  return FastSort::done;
}

// upvalue 1: LuaJIT's table.sort, kept for Lua comparators.
int table_sort(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  bool has_comparator = !lua_isnoneornil(L, 2);
  if (has_comparator) luaL_checktype(L, 2, LUA_TFUNCTION);
  if (has_comparator && !lua_iscfunction(L, 2)) {
    lua_settop(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 2, 0);
    return 0;
  }
  int n = int(lua_objlen(L, 1));
  lua_settop(L, 2);
  luaL_checkstack(L, 8, "table.sort");
  if (!has_comparator) {
    FastSort fast = sort_plain_values(L, n);
    if (fast == FastSort::stopped) return budget_raise(L);
    if (fast == FastSort::done) return 0;
  }
  HeapSort(L, has_comparator).run(n);
  return 0;
}

void replace_field(lua_State* L, const char* lib, const char* name, lua_CFunction fn, bool keep_original) {
  lua_getglobal(L, lib);
  if (keep_original) {
    lua_getfield(L, -1, name);
    lua_pushcclosure(L, fn, 1);
  } else {
    lua_pushcfunction(L, fn);
  }
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

}  // namespace

void install_bounded_library(lua_State* L) {
  replace_field(L, "string", "find", str_find, false);
  replace_field(L, "string", "match", str_match, false);
  replace_field(L, "string", "gmatch", str_gmatch, false);
  replace_field(L, "string", "gsub", str_gsub, false);
  replace_field(L, "table", "sort", table_sort, true);
}

}  // namespace sal::lua
