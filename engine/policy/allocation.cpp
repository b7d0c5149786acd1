// allocation.cpp — the allocation kind: how many replicas each expert gets.
//   ctx      = { nodes, slots, experts, layers, min_replicas, floor, floor_note, loads = {{t_1..t_E}, ...} }
//   proposal = { replicas = {{r_1..r_E}, ...per layer}, floor = f?, note = "..."? }
// `floor` is the guarantee the policy gives (default: ctx.floor, the job's f lowered if needed);
// the validator holds it to it. The floor policy: every expert gets ⌊N·c/E⌋, the remainder goes
// to the most loaded experts.
#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "plan/validate.h"
#include "policy/kinds.h"
#include "policy/lua_io.h"

namespace sal::policy {
namespace {

using lua_io::set_number;

// Characters of a proposal's note kept: it is a line in events and policy.show, not a document.
constexpr size_t kNoteChars = 400;

void push_ctx(lua_State* L, const Input& input) {
  const auto& in = std::get<AllocationInput>(input);
  auto fl = plan::effective_floor(in.min_replicas, in.nodes, in.slots, in.experts);
  lua_newtable(L);
  set_number(L, "nodes", in.nodes);
  set_number(L, "slots", in.slots);
  set_number(L, "experts", in.experts);
  set_number(L, "layers", double(in.loads.size()));
  set_number(L, "min_replicas", in.min_replicas);
  set_number(L, "floor", fl.f);
  lua_io::set_string(L, "floor_note", fl.note);
  lua_io::push_numbers2(L, in.loads);
  lua_setfield(L, -2, "loads");
}

Result<std::vector<std::vector<double>>> read_loads(lua_State* L, lua::Meter& m, int idx, const char* key) {
  int f = lua_io::field(L, idx, key);
  auto v = lua_io::read_numbers2(L, m, f, key);
  lua_pop(L, 1);
  return v;
}

Result<Input> read_ctx(lua_State* L, int idx, lua::Meter& m) {
  if (lua_type(L, idx) != LUA_TTABLE) return fail("ctx must be a table");
  AllocationInput in;
  for (auto [key, out, lo] : {std::tuple{"nodes", &in.nodes, 1u}, std::tuple{"slots", &in.slots, 1u},
                              std::tuple{"experts", &in.experts, 1u}, std::tuple{"min_replicas", &in.min_replicas, 1u}}) {
    auto v = lua_io::read_field_uint(L, idx, key, lo, 1u << 24);
    if (!v) return v.error();
    *out = *v;
  }
  auto loads = read_loads(L, m, idx, "loads");
  if (!loads) return loads.error();
  in.loads = std::move(*loads);
  for (size_t l = 0; l < in.loads.size(); ++l)
    if (in.loads[l].size() != in.experts)
      return fail("loads[", l + 1, "] has ", in.loads[l].size(), " entries for ", in.experts, " experts");
  return Input(std::move(in));
}

Result<Proposal> read(lua_State* L, int idx, const Input& input, lua::Meter& m) {
  const auto& in = std::get<AllocationInput>(input);
  if (lua_type(L, idx) != LUA_TTABLE) return fail("the proposal must be a table { replicas = ... }");
  SAL_TRY(lua_io::only_keys(L, idx, {"replicas", "floor", "note"}, "allocation proposal"));
  AllocationProposal p;
  int r = lua_io::field(L, idx, "replicas");
  auto reps = lua_io::read_uints2(L, m, r, "replicas", 0, UINT32_MAX);
  lua_pop(L, 1);
  if (!reps) return reps.error();
  p.replicas = std::move(*reps);
  int f = lua_io::field(L, idx, "floor");
  if (lua_isnil(L, f)) {
    p.floor = plan::effective_floor(in.min_replicas, in.nodes, in.slots, in.experts).f;
  } else {
    auto v = lua_io::read_uint(L, f, "floor", 1, 1u << 20);
    if (!v) {
      lua_pop(L, 1);
      return v.error();
    }
    p.floor = *v;
  }
  lua_pop(L, 1);
  p.note = lua_io::read_field_string(L, idx, "note", "", kNoteChars);
  return Proposal(std::move(p));
}

Status validate(const Proposal& proposal, const Input& input) {
  const auto& p = std::get<AllocationProposal>(proposal);
  const auto& in = std::get<AllocationInput>(input);
  if (p.replicas.size() != in.loads.size())
    return fail("replicas has ", p.replicas.size(), " layers, the model has ", in.loads.size());
  for (size_t l = 0; l < p.replicas.size(); ++l)
    if (auto s = plan::check_allocation(p.replicas[l], in.experts, in.nodes, in.slots, p.floor, plan::kLuaIds); !s)
      return Error("layer " + std::to_string(l + plan::kLuaIds) + ": " + s.error().message());
  return {};
}

Proposal floor_policy(const Input& input) {
  const auto& in = std::get<AllocationInput>(input);
  AllocationProposal p;
  auto fl = plan::effective_floor(in.min_replicas, in.nodes, in.slots, in.experts);
  p.floor = fl.f;
  p.note = fl.note;
  uint32_t total = in.nodes * in.slots;
  for (const auto& loads : in.loads) {
    std::vector<uint32_t> r(in.experts, total / std::max<uint32_t>(in.experts, 1));
    std::vector<uint32_t> order(in.experts);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return loads[a] > loads[b]; });
    for (uint32_t i = 0; i < total % std::max<uint32_t>(in.experts, 1); ++i) ++r[order[i]];
    p.replicas.push_back(std::move(r));
  }
  return p;
}

std::string summary(const Proposal& proposal) {
  const auto& p = std::get<AllocationProposal>(proposal);
  uint32_t lo = UINT32_MAX, hi = 0;
  for (const auto& layer : p.replicas)
    for (uint32_t r : layer) {
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
  std::string s = std::to_string(p.replicas.size()) + " layers, replicas per expert " +
                  std::to_string(lo == UINT32_MAX ? 0 : lo) + ".." + std::to_string(hi) + ", floor " +
                  std::to_string(p.floor);
  return p.note.empty() ? s : s + " (" + p.note + ")";
}

std::string diff(const Proposal& before, const Proposal& after) {
  const auto& a = std::get<AllocationProposal>(before);
  const auto& b = std::get<AllocationProposal>(after);
  if (a.replicas.size() != b.replicas.size()) return "different number of layers";
  std::string out;
  size_t changed = 0;
  for (size_t l = 0; l < a.replicas.size(); ++l)
    for (size_t e = 0; e < std::min(a.replicas[l].size(), b.replicas[l].size()); ++e) {
      if (a.replicas[l][e] == b.replicas[l][e]) continue;
      if (++changed <= 8)
        out += (out.empty() ? "" : ", ") + std::string("layer ") + std::to_string(l) + " expert " +
               std::to_string(e) + ": " + std::to_string(a.replicas[l][e]) + " -> " + std::to_string(b.replicas[l][e]);
    }
  if (changed == 0) return "same replica counts";
  return std::to_string(changed) + " expert(s) change replica count: " + out + (changed > 8 ? ", ..." : "");
}

nlohmann::ordered_json to_json(const Proposal& proposal) {
  const auto& p = std::get<AllocationProposal>(proposal);
  nlohmann::ordered_json j;
  j["replicas"] = p.replicas;
  j["floor"] = p.floor;
  if (!p.note.empty()) j["note"] = p.note;
  return j;
}

}  // namespace

const KindOps& allocation_ops() {
  static const KindOps ops{push_ctx, read_ctx, read, validate, floor_policy, summary, diff, to_json};
  return ops;
}

}  // namespace sal::policy
