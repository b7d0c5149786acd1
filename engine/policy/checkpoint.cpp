// checkpoint.cpp — the checkpoint-window kind: which operators are snapshotted in full when.
//   ctx      = { operators = {{name, kind, layer, expert, full_bytes, compute_bytes, popularity}, ...},
//                iteration_s, bandwidth, iteration, current = {window, period, slots} or nil }
//   proposal = { window = W, period = P (default W), slots = {{operator ids}, ...W lists} }
// Operator ids, layers and experts are 1-based in Lua. The floor policy snapshots everything every
// iteration: never wrong, only slow.
#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <numeric>
#include <tuple>

#include "policy/kinds.h"
#include "policy/lua_io.h"
#include "plan/validate.h"

namespace sal::policy {
namespace {

using lua_io::set_number;
using lua_io::set_string;

void push_schedule(lua_State* L, const plan::CheckpointSchedule& s) {
  lua_newtable(L);
  set_number(L, "window", s.window);
  set_number(L, "period", s.period);
  lua_io::push_uints2(L, s.slots, 1);
  lua_setfield(L, -2, "slots");
}

void push_ctx(lua_State* L, const Input& input) {
  const auto& in = std::get<CheckpointInput>(input);
  lua_newtable(L);
  lua_createtable(L, int(in.operators.size()), 0);
  for (size_t i = 0; i < in.operators.size(); ++i) {
    const auto& op = in.operators[i];
    lua_newtable(L);
    set_string(L, "name", op.name);
    set_string(L, "kind", op.kind);
    if (op.layer >= 0) set_number(L, "layer", op.layer + 1);
    if (op.expert >= 0) set_number(L, "expert", op.expert + 1);
    set_number(L, "full_bytes", op.full_bytes);
    set_number(L, "compute_bytes", op.compute_bytes);
    set_number(L, "popularity", op.popularity);
    lua_rawseti(L, -2, int(i + 1));
  }
  lua_setfield(L, -2, "operators");
  set_number(L, "iteration_s", in.iteration_s);
  set_number(L, "bandwidth", in.bandwidth_Bps);
  set_number(L, "iteration", double(in.iteration));
  if (in.has_current) {
    push_schedule(L, in.current);
    lua_setfield(L, -2, "current");
  }
}

// Characters of an operator's name and kind kept (a name is a line in a schedule, not a document).
constexpr size_t kNameChars = 200;

Result<OperatorInfo> read_operator(lua_State* L, lua::Meter& m, int idx, const std::string& path) {
  if (lua_type(L, idx) != LUA_TTABLE) return fail(path, ": expected an operator table");
  SAL_TRY(lua_io::plain_table(L, idx, path));
  SAL_TRY(m.value());
  OperatorInfo op;
  op.name = lua_io::read_field_string(L, idx, "name", path, kNameChars);
  op.kind = lua_io::read_field_string(L, idx, "kind", "expert", kNameChars);
  for (auto [key, out] : {std::pair{"layer", &op.layer}, std::pair{"expert", &op.expert}}) {
    int f = lua_io::field(L, idx, key);
    if (lua_type(L, f) == LUA_TNUMBER) *out = int32_t(lua_tonumber(L, f)) - 1;
    lua_pop(L, 1);
  }
  for (auto [key, out] : {std::pair{"full_bytes", &op.full_bytes}, std::pair{"compute_bytes", &op.compute_bytes},
                          std::pair{"popularity", &op.popularity}}) {
    auto v = lua_io::read_field_number(L, idx, key, path, 0);
    if (!v) return v.error();
    *out = *v;
  }
  return op;
}

Result<Input> read_ctx(lua_State* L, int idx, lua::Meter& m) {
  if (lua_type(L, idx) != LUA_TTABLE) return fail("ctx must be a table");
  CheckpointInput in;
  int ops = lua_io::field(L, idx, "operators");
  int n = lua_io::sequence_length(L, ops);
  if (n <= 0) {
    lua_pop(L, 1);
    return fail("operators: expected a non-empty list of operators");
  }
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, ops, i);
    auto op = read_operator(L, m, lua_gettop(L), "operators[" + std::to_string(i) + "]");
    lua_pop(L, 1);
    if (!op) {
      lua_pop(L, 1);
      return op.error();
    }
    in.operators.push_back(std::move(*op));
  }
  lua_pop(L, 1);
  for (auto [key, out, def] : {std::tuple{"iteration_s", &in.iteration_s, 1.0}, std::tuple{"bandwidth", &in.bandwidth_Bps, 16e9}}) {
    auto v = lua_io::read_field_number(L, idx, key, "ctx", def);
    if (!v) return v.error();
    *out = *v;
  }
  return Input(std::move(in));
}

Result<Proposal> read(lua_State* L, int idx, const Input& input, lua::Meter& m) {
  const auto& in = std::get<CheckpointInput>(input);
  if (lua_type(L, idx) != LUA_TTABLE) return fail("the proposal must be a table { window = ..., slots = ... }");
  SAL_TRY(lua_io::only_keys(L, idx, {"window", "period", "slots"}, "checkpoint proposal"));
  plan::CheckpointSchedule s;
  uint32_t n_ops = uint32_t(in.operators.size());
  int w = lua_io::field(L, idx, "window");
  auto window = lua_io::read_uint(L, w, "window", 1, std::max<uint32_t>(n_ops, 1));
  lua_pop(L, 1);
  if (!window) return window.error();
  s.window = *window;
  int p = lua_io::field(L, idx, "period");
  if (lua_isnil(L, p)) {
    s.period = s.window;
  } else {
    auto period = lua_io::read_uint(L, p, "period", 1, 1u << 30);
    if (!period) {
      lua_pop(L, 1);
      return period.error();
    }
    s.period = *period;
  }
  lua_pop(L, 1);
  int sl = lua_io::field(L, idx, "slots");
  auto slots = lua_io::read_uints2(L, m, sl, "slots", 1, std::max<uint32_t>(n_ops, 1), 1);
  lua_pop(L, 1);
  if (!slots) return slots.error();
  s.slots = std::move(*slots);
  return Proposal(std::move(s));
}

Status validate(const Proposal& proposal, const Input& input) {
  return plan::check_schedule(std::get<CheckpointProposal>(proposal), std::get<CheckpointInput>(input).operators.size(),
                              plan::kLuaIds);
}

Proposal floor_policy(const Input& input) {
  const auto& in = std::get<CheckpointInput>(input);
  plan::CheckpointSchedule s;
  s.slots.emplace_back(in.operators.size());
  std::iota(s.slots[0].begin(), s.slots[0].end(), 0u);
  return s;
}

std::string summary(const Proposal& proposal) {
  const auto& s = std::get<CheckpointProposal>(proposal);
  size_t ops = 0;
  for (const auto& x : s.slots) ops += x.size();
  return "window " + std::to_string(s.window) + ", period " + std::to_string(s.period) + ", " + std::to_string(ops) +
         " operators";
}

std::string diff(const Proposal& before, const Proposal& after) {
  const auto& a = std::get<CheckpointProposal>(before);
  const auto& b = std::get<CheckpointProposal>(after);
  auto slot_of = [](const plan::CheckpointSchedule& s) {
    std::vector<int64_t> where;
    for (size_t i = 0; i < s.slots.size(); ++i)
      for (uint32_t op : s.slots[i]) {
        if (op >= where.size()) where.resize(op + 1, -1);
        where[op] = int64_t(i);
      }
    return where;
  };
  auto wa = slot_of(a), wb = slot_of(b);
  size_t moved = 0;
  for (size_t op = 0; op < std::max(wa.size(), wb.size()); ++op)
    moved += (op < wa.size() ? wa[op] : -1) != (op < wb.size() ? wb[op] : -1);
  if (moved == 0 && a.window == b.window && a.period == b.period) return "same schedule";
  return "window " + std::to_string(a.window) + " -> " + std::to_string(b.window) + ", period " +
         std::to_string(a.period) + " -> " + std::to_string(b.period) + ", " + std::to_string(moved) +
         " operators change iteration";
}

nlohmann::ordered_json to_json(const Proposal& proposal) {
  const auto& s = std::get<CheckpointProposal>(proposal);
  nlohmann::ordered_json j;
  j["window"] = s.window;
  j["period"] = s.period;
  j["slots"] = s.slots;
  return j;
}

}  // namespace

const KindOps& checkpoint_ops() {
  static const KindOps ops{push_ctx, read_ctx, read, validate, floor_policy, summary, diff, to_json};
  return ops;
}

}  // namespace sal::policy
