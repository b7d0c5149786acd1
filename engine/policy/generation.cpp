// generation.cpp — see generation.h.
#include "policy/generation.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include <spdlog/spdlog.h>

#include "core/clock.h"
#include "core/strings.h"
#include "lua/convert.h"
#include "lua/meter.h"
#include "policy/kinds.h"
#include "policy/lua_io.h"

namespace sal::policy {
namespace {

// Decision times kept per generation for p50/p99.
constexpr size_t kTimingWindow = 256;
// Characters kept of a module's name, kind and field names, and of its doc: they are lines in
// listings and events (a policy could return a megabyte of doc).
constexpr size_t kFieldChars = 200;
constexpr size_t kDocChars = 1000;
// Values a policy's save() may hand on to its next generation (or to the copies questions use).
constexpr size_t kSavedValues = size_t(1) << 20;
const std::set<std::string> kModuleFields = {"api", "kind", "name", "doc", "decide", "selftest", "save", "restore"};

bool valid_lib_name(const std::string& n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// require "name": policies/lib/name.lua, loaded once per state.
int lua_require(lua_State* L) {
  auto* env = static_cast<GenerationEnv*>(lua_touserdata(L, lua_upvalueindex(1)));
  std::string name = luaL_checkstring(L, 1);
  if (!valid_lib_name(name)) return luaL_error(L, "require: '%s' is not a policies/lib module name", name.c_str());
  lua_getfield(L, lua_upvalueindex(2), name.c_str());
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  if (!env->load_lib) return luaL_error(L, "require: no policy library available");
  auto src = env->load_lib(name);
  if (!src) return luaL_error(L, "require '%s': %s", name.c_str(), src.error().message().c_str());
  if (luaL_loadbufferx(L, src->text.data(), src->text.size(), ("@" + src->origin).c_str(), "t") != 0)
    return lua_error(L);
  lua_call(L, 0, 1);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, lua_upvalueindex(2), name.c_str());
  return 1;
}

// ---- the selftest helper table `t` ----

// Structural equality, raw; every pair compared is a step of `m` (shared nesting makes a small
// table a long walk). An error once the meter stops it.
Result<bool> deep_equal(lua_State* L, lua::Meter& m, int a, int b, int depth) {
  SAL_TRY(m.value());
  if (depth > 32) return false;
  if (lua_type(L, a) != lua_type(L, b)) return false;
  if (lua_type(L, a) != LUA_TTABLE) return bool(lua_rawequal(L, a, b));
  if (!lua_checkstack(L, 4)) return false;
  lua_pushnil(L);
  while (lua_next(L, a) != 0) {
    lua_pushvalue(L, -2);
    lua_rawget(L, b);
    auto same = deep_equal(L, m, lua_gettop(L) - 1, lua_gettop(L), depth + 1);
    lua_pop(L, 2);
    if (!same || !*same) {
      lua_pop(L, 1);
      return same;
    }
  }
  lua_pushnil(L);
  while (lua_next(L, b) != 0) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawget(L, a);
    bool present = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (!present) {
      lua_pop(L, 1);
      return false;
    }
  }
  return true;
}

int t_fail(lua_State* L, int msg_idx, const std::string& what) {
  const char* msg = lua_tostring(L, msg_idx);
  return luaL_error(L, "%s%s%s", what.c_str(), msg ? ": " : "", msg ? msg : "");
}

int t_ok(lua_State* L) {
  if (!lua_toboolean(L, 1)) return t_fail(L, 2, "check failed");
  return 0;
}

// Characters of the two values t.eq quotes when they differ.
constexpr size_t kQuoteChars = 400;

int t_eq(lua_State* L) {
  std::string what;
  {
    lua::Meter m(L, lua_io::read_limits(L, "the values t.eq compares"));
    auto same = deep_equal(L, m, 1, 2, 0);
    if (same && *same) return 0;
    what = same ? "expected " + lua::render_quote(L, 2, kQuoteChars) + ", got " + lua::render_quote(L, 1, kQuoteChars)
                : "t.eq: " + same.error().message();
  }
  return t_fail(L, 3, clip(what, kQuoteChars));
}

int t_near(lua_State* L) {
  double a = luaL_checknumber(L, 1), b = luaL_checknumber(L, 2), tol = luaL_checknumber(L, 3);
  if (std::fabs(a - b) <= tol) return 0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.10g is not within %.3g of %.10g", a, tol, b);
  return t_fail(L, 4, buf);
}

// t.valid(proposal, ctx): raises unless the proposal passes the C++ validators for ctx.
int t_valid(lua_State* L) {
  Kind kind = Kind(lua_tointeger(L, lua_upvalueindex(1)));
  std::string problem;
  {
    const KindOps& ops = ops_for(kind);
    lua::Meter m(L, lua_io::read_limits(L, "t.valid's arguments"));
    auto in = ops.read_ctx(L, 2, m);
    auto p = in ? ops.read(L, 1, *in, m) : Result<Proposal>(Error(""));
    auto s = p ? ops.validate(*p, *in) : Status();
    problem = !in ? "bad ctx: " + in.error().message()
              : !p ? "malformed proposal: " + p.error().message()
              : !s ? "invalid proposal: " + s.error().message()
                   : "";
  }
  if (problem.empty()) return 0;
  lua_pushstring(L, ("t.valid: " + problem).c_str());
  return lua_error(L);
}

void push_test_helpers(lua_State* L, Kind kind) {
  lua_newtable(L);
  using Entry = std::pair<const char*, lua_CFunction>;
  for (auto [name, fn] : {Entry{"ok", t_ok}, Entry{"eq", t_eq}, Entry{"near", t_near}}) {
    lua_pushcfunction(L, fn);
    lua_setfield(L, -2, name);
  }
  lua_pushinteger(L, int(kind));
  lua_pushcclosure(L, t_valid, 1);
  lua_setfield(L, -2, "valid");
}

}  // namespace

std::string source_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

double GenerationStats::percentile(double p) const {
  if (ms.empty()) return 0;
  std::vector<double> v(ms.begin(), ms.end());
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

Generation::Generation(Kind kind, Source src, const GenerationEnv& env)
    : kind_(kind), source_(std::move(src)), env_(env), hash_(source_hash(source_.text)) {}

Result<std::unique_ptr<Generation>> Generation::load(Kind kind, const Source& src, const GenerationEnv& env) {
  std::unique_ptr<Generation> g(new Generation(kind, src, env));
  lua::SandboxOptions so;
  so.name = std::string(kind_name(kind)) + " policy " + src.origin;
  so.memory_limit = env.memory_limit;
  so.strict_reads = true;
  so.strict_writes = true;
  std::string origin = src.origin;
  so.print = [origin](const std::string& s) { spdlog::info("[policy {}] {}", origin, s); };
  g->sandbox_ = std::make_unique<lua::Sandbox>(so);
  lua_State* L = g->sandbox_->L();
  if (env.install_library) env.install_library(*g->sandbox_);
  lua_pushlightuserdata(L, &g->env_);
  lua_newtable(L);  // the module cache
  lua_pushcclosure(L, lua_require, 2);
  g->sandbox_->set_global("require");
  SAL_TRY(g->run_chunk());
  // (the chunk's errors carry origin:line already; the shape's name the field, here the file too)
  if (auto s = g->check_shape(); !s) return s.error().with_context(src.origin);
  g->loaded_wall_ms_ = wall_ms();
  return g;
}

lua::Budget Generation::budget() const {
  return {.deadline_ms = env_.budget_ms, .service = env_.service, .what = "policy budget"};
}

Status Generation::run_chunk() {
  SAL_TRY(sandbox_->load(source_.text, "@" + source_.origin));
  SAL_TRY(sandbox_->call(0, 1, budget()));
  lua_State* L = sandbox_->L();
  if (lua_type(L, -1) != LUA_TTABLE) {
    std::string got = luaL_typename(L, -1);
    lua_pop(L, 1);
    return fail("the file must return the policy module table, got a ", got);
  }
  if (auto plain = lua_io::plain_table(L, lua_gettop(L), "the module table"); !plain) {
    lua_pop(L, 1);
    return fail("the module table has a metatable: a policy module is a plain table of its fields");
  }
  module_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  return {};
}

// Reads the module's fields raw (no metamethod can run: the module is a plain table, run_chunk).
Status Generation::check_shape() {
  lua_State* L = sandbox_->L();
  lua_rawgeti(L, LUA_REGISTRYINDEX, module_ref_);
  int m = lua_gettop(L);
  auto field_type = [&](const char* key) {
    int t = lua_type(L, lua_io::field(L, m, key));
    lua_pop(L, 1);
    return t;
  };
  auto done = [&](Status s) {
    lua_settop(L, m - 1);
    return s;
  };
  lua_pushnil(L);
  while (lua_next(L, m) != 0) {
    lua_pop(L, 1);
    size_t n = 0;
    const char* k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : "?";
    std::string key = clip(std::string_view(k, lua_type(L, -1) == LUA_TSTRING ? n : 1), kFieldChars);
    if (!kModuleFields.count(key)) {
      lua_pop(L, 1);
      return done(fail("module field '", key, "' is not part of the policy contract",
                       did_you_mean(key, {kModuleFields.begin(), kModuleFields.end()})));
    }
  }
  int api = lua_io::field(L, m, "api");
  bool api_ok = lua_type(L, api) == LUA_TNUMBER && lua_tonumber(L, api) == 1;
  lua_pop(L, 1);
  std::string kind = lua_io::read_field_string(L, m, "kind", "", kFieldChars);
  name_ = lua_io::read_field_string(L, m, "name", "", kFieldChars);
  doc_ = lua_io::read_field_string(L, m, "doc", "", kDocChars);
  if (!api_ok) return done(fail("api must be 1 (the policy API version this engine speaks)"));
  if (kind != kind_name(kind_))
    return done(fail("kind is '", kind, "' but this is the ", kind_name(kind_), " slot"));
  if (name_.empty()) return done(fail("name: a policy needs a name"));
  if (doc_.empty()) return done(fail("doc: a policy needs a one-line description"));
  if (field_type("decide") != LUA_TFUNCTION) return done(fail("decide must be a function(ctx)"));
  for (auto [key, flag] : {std::pair{"selftest", &has_selftest_}, std::pair{"save", &has_save_},
                           std::pair{"restore", &has_restore_}}) {
    int t = field_type(key);
    if (t != LUA_TNIL && t != LUA_TFUNCTION) return done(fail(key, " must be a function when present"));
    *flag = t == LUA_TFUNCTION;
  }
  return done({});
}

// Pushes module[method], read raw (check_shape made sure it is a function).
void Generation::push_method(lua_State* L, const char* method) const {
  lua_rawgeti(L, LUA_REGISTRYINDEX, module_ref_);
  lua_io::field(L, lua_gettop(L), method);
  lua_remove(L, -2);
}

// Runs `work` inside a budgeted call of this generation's state; its errors and the Lua errors of
// the methods it calls are named after `method` ("decide: …").
Status Generation::run_method(const char* method, int nresults, const lua::Sandbox::Work& work) {
  auto s = sandbox_->run(0, nresults, budget(), work);
  if (!s) return Error(std::string(method) + ": " + s.error().message());
  return s;
}

Result<Proposal> Generation::decide(const Input& in) {
  const KindOps& ops = ops_for(kind_);
  std::optional<Proposal> out;
  auto s = run_method("decide", 0, [&](lua_State* L) -> Status {
    push_method(L, "decide");
    ops.push_ctx(L, in);
    lua_call(L, 1, 1);
    lua::Meter m(L, lua_io::read_limits(L, "the " + std::string(kind_name(kind_)) + " proposal"));
    auto p = ops.read(L, lua_gettop(L), in, m);
    if (!p) return lua::budget_poll(L) ? Error("malformed proposal: " + p.error().message()) : p.error();
    out = std::move(*p);
    return {};
  });
  if (!s) return s.error();
  return std::move(*out);
}

Status Generation::selftest() {
  if (!has_selftest_) return {};
  return run_method("selftest", 0, [&](lua_State* L) -> Status {
    push_method(L, "selftest");
    push_test_helpers(L, kind_);
    lua_call(L, 1, 0);
    return {};
  });
}

// save() of this generation, its value left on top of this state's stack.
Status Generation::save_onto_stack() {
  return run_method("save", 1, [&](lua_State* L) -> Status {
    push_method(L, "save");
    lua_call(L, 0, 1);
    return {};
  });
}

namespace {

// A state that only holds one plain value (a policy's saved state) at stack index 1.
std::unique_ptr<lua::Sandbox> holder(size_t memory_limit) {
  return std::make_unique<lua::Sandbox>(lua::SandboxOptions{.name = "kept policy state", .memory_limit = memory_limit});
}

lua::MeterLimits saved_state_limits() {
  return {.what = "the saved state", .values = {kSavedValues, "the limit of a policy's saved state"}};
}

// Copies the value at `idx` of `from` into `to`, inside a budgeted call of `to` (its allocations
// are capped there); the copy is left at the top of to's stack.
Status copy_into(lua::Sandbox& to, lua_State* from, int idx, const lua::Budget& budget) {
  int from_top = lua_gettop(from);
  auto s = to.run(0, 1, budget, [&](lua_State* L) -> Status {
    lua::Meter m(L, saved_state_limits());
    return lua::copy_value(from, idx, L, m);
  });
  lua_settop(from, from_top);  // a copy stopped midway leaves the keys it was walking
  return s;
}

}  // namespace

void Generation::keep_state() {
  if (!has_save_) return;
  lua_State* L = sandbox_->L();
  int top = lua_gettop(L);
  if (!kept_) kept_ = holder(2 * env_.memory_limit);  // made once, reused (the plan path is timed)
  lua_settop(kept_->L(), 0);
  kept_problem_.clear();
  if (auto saved = save_onto_stack(); !saved) {
    kept_problem_ = "the live generation's " + saved.error().message();
  } else if (auto copied = copy_into(*kept_, L, lua_gettop(L), budget()); !copied) {
    kept_problem_ = "save() returned " + copied.error().message();
  }
  if (!kept_problem_.empty()) lua_settop(kept_->L(), 0);
  lua_settop(L, top);
}

std::unique_ptr<lua::Sandbox> Generation::kept_state() const {
  if (!kept_ || lua_gettop(kept_->L()) < 1) return nullptr;
  auto h = holder(2 * env_.memory_limit);
  if (!copy_into(*h, kept_->L(), 1, budget())) return nullptr;
  return h;
}

Status Generation::restore_kept(lua::Sandbox& h) {
  if (!has_restore_) return {};
  lua_State* from = h.L();
  bool copied = false;
  int from_top = lua_gettop(from);
  auto s = sandbox_->run(0, 0, budget(), [&](lua_State* L) -> Status {
    push_method(L, "restore");
    lua::Meter m(L, saved_state_limits());
    SAL_TRY(lua::copy_value(from, 1, L, m));
    copied = true;
    lua_call(L, 1, 0);
    return {};
  });
  lua_settop(from, from_top);
  if (s) return s;
  return Error((copied ? "restore: " : "kept state: ") + s.error().message());
}

void Generation::record(double ms, bool error, bool rejected, const std::string& problem) {
  ++stats.decisions;
  stats.errors += error;
  stats.rejections += rejected;
  if (error || rejected) stats.last_problem = problem;
  stats.ms.push_back(ms);
  if (stats.ms.size() > kTimingWindow) stats.ms.pop_front();
}

}  // namespace sal::policy
