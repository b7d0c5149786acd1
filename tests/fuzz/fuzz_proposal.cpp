// fuzz_proposal.cpp — the proposal reader (policy/lua_io.h and each kind's read) against proposals
// built with metatables (issue 34). The input is a little program for a stack machine that builds
// a Lua value in a sandbox — numbers, strings, tables, fields, list items, a value used twice
// (shared nesting), a table put inside itself (a cycle), and metatables whose every metamethod
// records that it ran and then loops — which is then read as each kind's proposal inside a
// budgeted call, with the reader's meter. The reader must end with a proposal or an error, within
// the budget, and must never run a metamethod: a trap that ran is a crash of this target.
#include <lua.hpp>

#include <vector>

#include "fuzz/targets.h"
#include "lua/sandbox.h"
#include "policy/kinds.h"
#include "policy/lua_io.h"

namespace sal::fuzz {
namespace {

// A metatable each of whose metamethods marks TRAPPED and never returns.
const char* kTraps = R"(
  local function trap() TRAPPED = true while true do end end
  TRAP = {}
  for _, m in ipairs({ '__index', '__newindex', '__len', '__call', '__tostring', '__eq', '__lt', '__le',
                       '__concat', '__unm', '__add', '__pairs', '__ipairs', '__gc' }) do TRAP[m] = trap end
  TRAP.__metatable = 'locked'
)";

// Keys the machine uses: the fields of every kind's proposal, and some that are none.
const char* kKeys[] = {"replicas", "floor", "note", "placement", "window", "period", "slots", "r", "hosts",
                       "assignment", "wipeout", "x", "1", ""};

// The stack machine: each byte is an operation (its low 4 bits) with an argument (its high 4).
// The stack is the Lua stack above `base`; operations that need more values than it holds do
// nothing. At most kMaxOps operations and kMaxStack values, so one input stays small.
constexpr size_t kMaxOps = 512;
constexpr int kMaxStack = 64;

void build(lua_State* L, const uint8_t* data, size_t size) {
  int base = lua_gettop(L);
  auto depth = [&] { return lua_gettop(L) - base; };
  for (size_t i = 0; i < size && i < kMaxOps; ++i) {
    int op = data[i] & 0x0f, arg = data[i] >> 4;
    if (depth() >= kMaxStack && op <= 3) continue;
    switch (op) {
      case 0: lua_pushinteger(L, arg); break;                                  // a small number
      case 1: lua_pushnumber(L, arg == 15 ? 1e300 : -arg - 0.5); break;          // odd numbers
      case 2: lua_pushstring(L, kKeys[arg % std::size(kKeys)]); break;         // a string
      case 3: lua_createtable(L, arg, 0); break;                               // a table
      case 4:                                                                  // t[key] = v (raw: the
        if (depth() >= 2 && lua_istable(L, -2)) {                              // machine runs no trap)
          lua_pushstring(L, kKeys[arg % std::size(kKeys)]);
          lua_insert(L, -2);
          lua_rawset(L, -3);
        }
        break;
      case 5:                                                                  // t[#t + 1] = v
        if (depth() >= 2 && lua_istable(L, -2)) lua_rawseti(L, -2, int(lua_objlen(L, -2)) + 1);
        break;
      case 6:                                                                  // setmetatable(t, TRAP)
        if (depth() >= 1 && lua_istable(L, -1)) {
          lua_pushstring(L, "TRAP");
          lua_rawget(L, LUA_GLOBALSINDEX);
          lua_setmetatable(L, -2);
        }
        break;
      case 7:                                                                  // the value again (shared)
        if (depth() >= 1) lua_pushvalue(L, -1 - (arg % depth()));
        break;
      case 8:                                                                  // t[1] = t (a cycle)
        if (depth() >= 1 && lua_istable(L, -1)) {
          lua_pushvalue(L, -1);
          lua_rawseti(L, -2, 1);
        }
        break;
      case 9:                                                                  // a function
        lua_pushcfunction(L, [](lua_State*) { return 0; });
        break;
      case 10: lua_pushboolean(L, arg & 1); break;
      case 11:                                                                 // t[k] = v, k any value
        if (depth() >= 3 && lua_istable(L, -3)) lua_rawset(L, -3);
        break;
      default:
        if (depth() >= 1) lua_pop(L, 1);
    }
  }
  lua_settop(L, base + (depth() > 0 ? 1 : 0));  // the value built first is the proposal
  if (depth() == 0) lua_newtable(L);
}

// One input per kind, in the shape a live job's slots see.
policy::Input input_of(policy::Kind k) {
  switch (k) {
    case policy::Kind::allocation: return policy::AllocationInput{4, 4, 4, 2, {{10, 70, 0, 20}}};
    case policy::Kind::placement: {
      policy::PlacementInput in;
      in.nodes = 2, in.slots = 2, in.experts = 2, in.floor = 1, in.replicas = {{2, 2}}, in.loads = {{1, 1}};
      return in;
    }
    case policy::Kind::checkpoint: {
      policy::CheckpointInput in;
      in.operators.resize(3);
      return in;
    }
    case policy::Kind::redundancy: {
      policy::RedundancyInput in;
      in.groups = 2, in.alive = {true, true};
      return in;
    }
    case policy::Kind::health: {
      policy::HealthInput in;
      in.workers = {{"1.0", 1, 1, 1, false, 20, 0, 1}, {"2.0", 2, 2, 2, true, 20, 5, 1}};
      return in;
    }
  }
  return policy::AllocationInput{};
}

}  // namespace

int proposal(const uint8_t* data, size_t size) {
  static lua::Sandbox* sb = [] {
    auto* s = new lua::Sandbox({.name = "fuzz proposal", .memory_limit = 8u << 20});
    if (!s->load(kTraps, "=traps") || !s->call(0, 0, {.deadline_ms = 1000})) __builtin_trap();
    return s;
  }();
  lua::Budget budget{.deadline_ms = 50, .what = "fuzz budget"};
  for (policy::Kind k : policy::kKinds) {
    const policy::KindOps& ops = policy::ops_for(k);
    policy::Input in = input_of(k);
    auto s = sb->run(0, 0, budget, [&](lua_State* L) -> Status {
      build(L, data, size);
      lua::Meter m(L, policy::lua_io::read_limits(L, "the proposal"));
      (void)ops.read(L, lua_gettop(L), in, m);  // a proposal or an error: both fine
      return {};
    });
    (void)s;  // a memory error while building is fine too
    lua_pushstring(sb->L(), "TRAPPED");
    lua_rawget(sb->L(), LUA_GLOBALSINDEX);
    bool trapped = lua_toboolean(sb->L(), -1);
    lua_pop(sb->L(), 1);
    if (trapped || lua_gettop(sb->L()) != 0) __builtin_trap();  // a metamethod ran, or the stack leaked
  }
  return 0;
}

}  // namespace sal::fuzz
