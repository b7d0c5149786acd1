// sandbox.cpp — see sandbox.h. The allocator and the count hook find their state through the
// allocator's userdata (lua_getallocf), so nothing is stored in the Lua registry that code could
// reach.
#include "lua/sandbox.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <set>

#include "core/clock.h"
#include "core/deadline.h"
#include "core/strings.h"
#include "lua/strlib.h"

namespace sal::lua {

// How often (in VM instructions) the count hook looks at the clock. ~1000 instructions is a few
// microseconds of interpreted Lua, so the deadline is honoured to well under a millisecond.
constexpr int kHookInstructions = 1000;
// Memory the host's own small steps between calls may take beyond the cap: a stack grown by a few
// slots, the error value of a call. None of them runs inside a protected call, so none may fail;
// everything sizeable the host does with a state (a ctx pushed, a result read, a state copied)
// runs inside one (Sandbox::run), where the cap holds exactly.
constexpr size_t kHostHeadroom = 1u << 20;
// A call past its deadline gets no block of this size or more: the count hook cannot stop a C
// function inside one step (`s .. s` doubling a string to the cap), and a fresh block costs its
// pages' first touch — 32 MiB is about 90 ms of page faults on a small virtual machine — so a call
// that keeps asking for large blocks would otherwise run on far past its budget.
constexpr size_t kClockedAllocBytes = 64u << 10;
// "Did you mean" for an unknown global compares it with globals of a similar length only (a
// suggestion is at most kSuggestEdits edits away), and with at most kSuggestCandidates of them,
// for names up to kSuggestMaxChars: a session with a million globals, or a name of a megabyte,
// costs the error no more than a few microseconds.
constexpr size_t kSuggestEdits = 3;
constexpr size_t kSuggestCandidates = 4096;
constexpr size_t kSuggestMaxChars = 64;
// A state holding more than this many tenths of its cap is collected after a call, and before the
// next: LuaJIT counts garbage against the cap until its collector runs.
constexpr size_t kCollectAfterTenths = 5;
constexpr size_t kCollectBeforeTenths = 9;
// Longest global name offered for completion: longer ones are not names anyone types.
constexpr size_t kMaxGlobalNameChars = 256;
// Bytes of an error message kept (a chunk may raise a string of many megabytes): the rest is cut,
// saying how long it was. Far below the wire's limit for an error text.
constexpr size_t kErrorMessageMax = 8u << 10;

struct Sandbox::Core {
  size_t used = 0;
  size_t limit = 0;
  bool hit_limit = false;
  bool refused_late = false;  // a large block refused because the call's deadline had passed
  const Budget* budget = nullptr;  // non-null while a call runs
  int64_t start_ns = 0;
  int64_t deadline_ns = 0;
  int64_t next_service_ns = 0;
  bool expired = false;
  int expired_after_ms = 0;
  std::set<std::string> declared;  // globals strict mode accepts while nil
  std::string identity;
  std::string working_dir;
  // The host's own functions, made once when the state is new and kept in the registry: pushing
  // them before a call allocates nothing, so a state filled to its cap cannot make the host's next
  // call raise outside a protected call.
  int handler_ref = LUA_NOREF;
  int work_ref = LUA_NOREF;
};

namespace {

void* capped_alloc(void* ud, void* ptr, size_t osize, size_t nsize);

// The sandbox state behind L; null for a state a Sandbox did not make (its allocator is not ours).
Sandbox::Core* core_of(lua_State* L) {
  void* ud = nullptr;
  if (lua_getallocf(L, &ud) != capped_alloc) return nullptr;
  return static_cast<Sandbox::Core*>(ud);
}

void* capped_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* c = static_cast<Sandbox::Core*>(ud);
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    c->used -= old;
    std::free(ptr);
    return nullptr;
  }
  size_t limit = c->budget ? c->limit : c->limit + kHostHeadroom;
  if (nsize > old && c->used - old + nsize > limit) {
    c->hit_limit = true;
    return nullptr;  // LuaJIT raises "not enough memory"; shrinking never fails
  }
  if (c->budget && nsize >= kClockedAllocBytes && nsize > old && mono_ns() >= c->deadline_ns) {
    c->refused_late = true;
    return nullptr;  // the hook's next look at the clock stops the chunk (check_budget)
  }
  void* p = std::realloc(ptr, nsize);
  if (p) c->used = c->used - old + nsize;
  return p;
}

void budget_hook(lua_State* L, lua_Debug*);

// The running call's deadline: false once it has passed (from then on the hook stops the chunk at
// every instruction, so a pcall inside it cannot keep it alive); runs the service function when due.
bool check_budget(lua_State* L, Sandbox::Core& c) {
  int64_t now = mono_ns();
  if (c.expired || now >= c.deadline_ns) {
    if (!c.expired) {
      c.expired = true;
      c.expired_after_ms = int((now - c.start_ns) / 1'000'000);
      lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1);
    }
    return false;
  }
  if (c.budget->service && now >= c.next_service_ns) {
    c.next_service_ns = now + c.budget->service_every_ms * 1'000'000;
    c.budget->service();
  }
  return true;
}

// "<what> exceeded: stopped after N ms", the one wording of a budget's error.
std::string exceeded_text(const std::string& what, int ms) {
  return what + " exceeded: stopped after " + std::to_string(ms) + " ms";
}

std::string budget_text(const Sandbox::Core& c) { return exceeded_text(c.budget->what, c.expired_after_ms); }

// A call that ended on a large block refused past its deadline, before the hook looked at the clock.
std::string late_refusal_text(const Sandbox::Core& c, const Budget& budget) {
  return exceeded_text(budget.what, c.expired ? c.expired_after_ms : int((mono_ns() - c.start_ns) / 1'000'000));
}

// The same wording, raised from the hook (no C++ temporary lives across the error's unwinding).
int raise_budget_error(lua_State* L, const Sandbox::Core& c) {
  return luaL_error(L, "%s exceeded: stopped after %d ms", c.budget->what.c_str(), c.expired_after_ms);
}

void budget_hook(lua_State* L, lua_Debug*) {
  auto* c = core_of(L);
  if (c->budget && !check_budget(L, *c)) raise_budget_error(L, *c);
}

int traceback_handler(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

// Sandbox::run's work, handed to the trampoline below as its first argument (a light userdata).
struct WorkCall {
  const Sandbox::Work* work;
  int nresults;
  Status status;
};

int run_work(lua_State* L) {
  auto* wc = static_cast<WorkCall*>(lua_touserdata(L, 1));
  lua_remove(L, 1);
  wc->status = (*wc->work)(L);
  if (!wc->status) return 0;
  if (wc->nresults == LUA_MULTRET) return lua_gettop(L);
  if (lua_gettop(L) < wc->nresults) lua_settop(L, wc->nresults);
  return wc->nresults;
}

// The error value on top of the stack as text, cut at kErrorMessageMax.
std::string error_text(lua_State* L) {
  if (lua_type(L, -1) != LUA_TSTRING) return "error";
  size_t n = 0;
  const char* s = lua_tolstring(L, -1, &n);
  if (n <= kErrorMessageMax) return std::string(s, n);
  return std::string(s, kErrorMessageMax) + "… (an error message of " + std::to_string(n) + " bytes, cut)";
}

// Keeps the message and the traceback lines that point into sandboxed code (drops [C] frames and
// the host's own); omits the traceback entirely when it has a single frame.
std::string tidy_traceback(const std::string& raw) {
  auto pos = raw.find("\nstack traceback:");
  if (pos == std::string::npos) return raw;
  std::string msg = raw.substr(0, pos);
  std::vector<std::string> frames;
  for (auto& line : split(raw.substr(pos + 1), '\n')) {
    std::string t(trim(line));
    if (t.empty() || t == "stack traceback:" || t.rfind("[C]", 0) == 0) continue;
    frames.push_back(t);
  }
  if (frames.size() <= 1) return msg;
  return msg + "\nstack traceback:\n  " + join(frames, "\n  ");
}

int strict_index(lua_State* L) {
  // upvalue 1: the candidate names are computed lazily from the globals table itself
  const char* key = lua_tostring(L, 2);
  if (!key) return 0;
  auto* c = core_of(L);
  if (c->declared.count(key)) return 0;
  size_t key_len = std::strlen(key);
  std::vector<std::string> names;
  if (key_len <= kSuggestMaxChars) {
    lua_pushnil(L);
    while (lua_next(L, 1) != 0 && names.size() < kSuggestCandidates) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING) continue;
      size_t n = lua_objlen(L, -1);
      if (n + kSuggestEdits >= key_len && n <= key_len + kSuggestEdits) names.emplace_back(lua_tostring(L, -1));
    }
    lua_settop(L, 2);
    for (const auto& d : c->declared) names.push_back(d);
  }
  std::string m = std::string("unknown global '") + clip(key, kSuggestMaxChars) + "'" + did_you_mean(key, names);
  lua_pushstring(L, m.c_str());
  return lua_error(L);
}

int strict_newindex(lua_State* L) {
  const char* key = lua_tostring(L, 2);
  if (key && core_of(L)->declared.count(key) == 0)
    return luaL_error(L, "assignment to undeclared global '%s' (use local)", key);
  lua_rawset(L, 1);
  return 0;
}

int readonly_newindex(lua_State* L) {
  const char* label = lua_tostring(L, lua_upvalueindex(1));
  return luaL_error(L, "%s is read-only", label ? label : "table");
}

int sandbox_print(lua_State* L) {
  auto* fn = static_cast<std::function<void(const std::string&)>*>(
      lua_touserdata(L, lua_upvalueindex(1)));
  int n = lua_gettop(L);
  std::string line;
  for (int i = 1; i <= n; ++i) {
    lua_pushvalue(L, lua_upvalueindex(2));  // the original tostring
    lua_pushvalue(L, i);
    lua_call(L, 1, 1);
    size_t len = 0;
    const char* s = lua_tolstring(L, -1, &len);
    if (!s) return luaL_error(L, "'tostring' must return a string to 'print'");
    if (i > 1) line += '\t';
    line.append(s, len);
    lua_pop(L, 1);
  }
  (*fn)(line);
  return 0;
}

int collectgarbage_count(lua_State* L) {
  const char* opt = luaL_optstring(L, 1, "count");
  if (std::strcmp(opt, "count") != 0)
    return luaL_error(L, "collectgarbage: only \"count\" is available in the sandbox");
  lua_pushnumber(L, lua_gc(L, LUA_GCCOUNT, 0) + lua_gc(L, LUA_GCCOUNTB, 0) / 1024.0);
  return 1;
}

void open_lib(lua_State* L, lua_CFunction open, const char* name) {
  lua_pushcfunction(L, open);
  lua_pushstring(L, name);
  lua_call(L, 1, 0);
}

}  // namespace

Sandbox::Sandbox(SandboxOptions opts) : opts_(std::move(opts)), core_(std::make_unique<Core>()) {
  core_->limit = opts_.memory_limit;
  L_ = lua_newstate(capped_alloc, core_.get());
  if (!L_) throw std::runtime_error(opts_.name + ": cannot create a Lua state");
  luaJIT_setmode(L_, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  if (!opts_.print) {
    std::string name = opts_.name;
    opts_.print = [name](const std::string& s) { spdlog::info("[{}] {}", name, s); };
  }
  install_globals();
  install_host_functions();
}

void Sandbox::install_host_functions() {
  lua_pushcfunction(L_, traceback_handler);
  core_->handler_ref = luaL_ref(L_, LUA_REGISTRYINDEX);
  lua_pushcfunction(L_, run_work);
  core_->work_ref = luaL_ref(L_, LUA_REGISTRYINDEX);
}

Sandbox::~Sandbox() {
  if (L_) lua_close(L_);
}

void Sandbox::install_globals() {
  lua_State* L = L_;
  open_lib(L, luaopen_base, "");
  open_lib(L, luaopen_table, LUA_TABLIBNAME);
  open_lib(L, luaopen_string, LUA_STRLIBNAME);
  open_lib(L, luaopen_math, LUA_MATHLIBNAME);
  open_lib(L, luaopen_bit, LUA_BITLIBNAME);
  install_bounded_library(L);  // find/match/gmatch/gsub/sort that stop at the budget

  // Nothing that reads files, loads code (text or bytecode), escapes environments or bypasses
  // metatables stays reachable.
  for (const char* name : {"dofile", "loadfile", "load", "loadstring", "getfenv", "setfenv",
                           "newproxy", "rawset", "rawget", "gcinfo", "module", "require"}) {
    lua_pushnil(L);
    lua_setglobal(L, name);
  }
  lua_getglobal(L, "string");
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_pop(L, 1);
  lua_pushcfunction(L, collectgarbage_count);
  lua_setglobal(L, "collectgarbage");

  lua_pushlightuserdata(L, &opts_.print);
  lua_getglobal(L, "tostring");
  lua_pushcclosure(L, sandbox_print, 2);
  lua_setglobal(L, "print");

  // Globals table metatable: strict reads/writes, and locked.
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  lua_newtable(L);
  if (opts_.strict_reads) {
    lua_pushcfunction(L, strict_index);
    lua_setfield(L, -2, "__index");
  }
  if (opts_.strict_writes) {
    lua_pushcfunction(L, strict_newindex);
    lua_setfield(L, -2, "__newindex");
  }
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
}

void Sandbox::set_global(const char* name) {
  lua_pushstring(L_, name);
  lua_insert(L_, -2);
  lua_rawset(L_, LUA_GLOBALSINDEX);
}

void Sandbox::allow_global(const std::string& name) { core_->declared.insert(name); }

void Sandbox::make_readonly(lua_State* L, const std::string& label) {
  int real = lua_gettop(L);
  lua_newtable(L);  // proxy
  lua_newtable(L);  // its metatable
  lua_pushvalue(L, real);
  lua_setfield(L, -2, "__index");
  lua_pushstring(L, label.c_str());
  lua_pushcclosure(L, readonly_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_pushstring(L, label.c_str());
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_replace(L, real);
}

Status Sandbox::load(const std::string& text, const std::string& chunk_name) {
  int rc = luaL_loadbufferx(L_, text.data(), text.size(), chunk_name.c_str(), "t");
  if (rc == 0) return {};
  std::string msg = lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "unknown load error";
  lua_pop(L_, 1);
  if (rc == LUA_ERRMEM) msg = "memory limit exceeded while loading";
  return Error(msg);
}

Status Sandbox::call(int nargs, int nresults, const Budget& budget) {
  return guarded(lua_gettop(L_) - nargs, nargs, nresults, budget);
}

Status Sandbox::run(int nargs, int nresults, const Budget& budget, const Work& work) {
  int base = lua_gettop(L_) - nargs + 1;  // where the trampoline goes, below the arguments
  WorkCall wc{&work, nresults, {}};
  lua_rawgeti(L_, LUA_REGISTRYINDEX, core_->work_ref);
  lua_insert(L_, base);
  lua_pushlightuserdata(L_, &wc);
  lua_insert(L_, base + 1);
  SAL_TRY(guarded(base, nargs + 1, nresults, budget));
  if (!wc.status) lua_settop(L_, base - 1);
  return wc.status;
}

// lua_pcall of the function at `base` (with nargs arguments above it) under the budget, with the
// traceback handler; nothing here allocates outside the protected call.
Status Sandbox::guarded(int base, int nargs, int nresults, const Budget& budget) {
  Core& c = *core_;
  if (c.budget) return fail(opts_.name, ": re-entrant call refused");
  // LuaJIT raises "not enough memory" without collecting first: a state near its cap with garbage
  // in it (a hog the chunk dropped) is collected before the next call, which would fail otherwise.
  if (c.used > c.limit / 10 * kCollectBeforeTenths) lua_gc(L_, LUA_GCCOLLECT, 0);
  lua_rawgeti(L_, LUA_REGISTRYINDEX, c.handler_ref);
  lua_insert(L_, base);
  c.budget = &budget;
  c.expired = false;
  c.hit_limit = false;
  c.refused_late = false;
  c.start_ns = mono_ns();
  c.deadline_ns = c.start_ns + budget.deadline_ms * 1'000'000;
  c.next_service_ns = c.start_ns + budget.service_every_ms * 1'000'000;
  lua_sethook(L_, budget_hook, LUA_MASKCOUNT, kHookInstructions);
  int rc;
  {
    DeadlineScope deadline(c.deadline_ns);  // long C++ loops under this call stop at it too
    rc = lua_pcall(L_, nargs, nresults, base);
  }
  lua_sethook(L_, nullptr, 0, 0);
  c.budget = nullptr;
  lua_remove(L_, base);  // the handler
  if (rc == 0) {
    if (c.used > c.limit / 10 * kCollectAfterTenths) lua_gc(L_, LUA_GCCOLLECT, 0);
    return {};
  }
  std::string msg = error_text(L_);
  lua_settop(L_, base - 1);
  // What a failed call built is garbage now: collected when it is much of the cap.
  if (rc == LUA_ERRMEM || c.hit_limit || c.used > c.limit / 10 * kCollectAfterTenths) lua_gc(L_, LUA_GCCOLLECT, 0);
  if (c.hit_limit || (rc == LUA_ERRMEM && !c.refused_late))
    return fail(opts_.name, ": memory limit of ", opts_.memory_limit >> 20, " MiB exceeded");
  if (rc == LUA_ERRMEM) return Error(late_refusal_text(c, budget));
  return Error(tidy_traceback(msg));
}

std::vector<std::string> Sandbox::global_names(const std::string& prefix, size_t max) const {
  std::vector<std::string> names;
  lua_pushnil(L_);
  while (lua_next(L_, LUA_GLOBALSINDEX) != 0) {
    lua_pop(L_, 1);
    if (names.size() >= max) {
      lua_pop(L_, 1);
      break;
    }
    size_t n = 0;
    const char* s = lua_type(L_, -1) == LUA_TSTRING ? lua_tolstring(L_, -1, &n) : nullptr;
    if (s && n <= kMaxGlobalNameChars && std::string_view(s, n).substr(0, prefix.size()) == prefix)
      names.emplace_back(s, n);
  }
  return names;
}

void Sandbox::set_identity(std::string who) { core_->identity = std::move(who); }

void Sandbox::set_working_dir(std::string dir) { core_->working_dir = std::move(dir); }

const std::string& Sandbox::working_dir(lua_State* L) {
  static const std::string none;
  auto* c = core_of(L);
  return c ? c->working_dir : none;
}

const std::string& Sandbox::identity(lua_State* L) {
  static const std::string none;
  auto* c = core_of(L);
  return c ? c->identity : none;
}

bool budget_poll(lua_State* L) {
  auto* c = core_of(L);
  return !c || !c->budget || check_budget(L, *c);
}

int budget_raise(lua_State* L) {
  auto* c = core_of(L);
  if (!c || !c->budget) return luaL_error(L, "budget exceeded");
  return raise_budget_error(L, *c);
}

std::string budget_message(lua_State* L) {
  auto* c = core_of(L);
  if (!c || !c->budget) return "budget exceeded";
  return budget_text(*c);
}

size_t Sandbox::memory_used() const { return core_->used; }

size_t Sandbox::memory_cap(lua_State* L) {
  auto* c = core_of(L);
  return c ? c->limit : SIZE_MAX;
}

size_t Sandbox::memory_left(lua_State* L) {
  auto* c = core_of(L);
  if (!c) return SIZE_MAX;
  return c->used >= c->limit ? 0 : c->limit - c->used;
}
bool Sandbox::busy() const { return core_->budget != nullptr; }

}  // namespace sal::lua
