// redundancy.cpp — the redundancy kind (SPARe): which shard types each data-parallel group hosts
// and, this step, computes.
//   ctx      = { groups, alive = {bool per group}, redundancy = r (0: choose), current = {r, hosts,
//                assignment, wipeout} or nil }
//   proposal = { r, hosts = {{shard types}, ...per group}, assignment = {{...}, ...per group}, wipeout,
//                after_patch = "cheaper" | "degraded" | "regroup", spread = true | false }
// after_patch says, when the proposal patches a step, what follows its commit (plan::AfterPatch):
// degraded steps (the dropped groups out, their shard types computed as `assignment` says) while
// they lose less than a plan switch costs, or until the next plan, or the survivors re-planned at
// once. Left out: "cheaper" where every hosted type keeps two hosts among the groups up (one more
// loss mid-step is still masked), else "regroup" (the next plan refills the groups). spread says,
// when the proposal patches a step, that the dropped groups' shard types are split over every group
// still in it rather than each given whole to the group `assignment` names (left out: false).
// Groups and shard types are 1-based in Lua. The floor policy is no redundancy: group g hosts and
// computes shard g; any dead group is a wipe-out.
#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "policy/kinds.h"
#include "policy/lua_io.h"
#include "plan/validate.h"

namespace sal::policy {
namespace {

using lua_io::set_number;

void push_stacks(lua_State* L, const plan::ShardStacks& s) {
  lua_newtable(L);
  set_number(L, "r", s.redundancy);
  lua_io::push_uints2(L, s.hosts, 1);
  lua_setfield(L, -2, "hosts");
  lua_io::push_uints2(L, s.assignment, 1);
  lua_setfield(L, -2, "assignment");
  lua_pushboolean(L, s.wipeout);
  lua_setfield(L, -2, "wipeout");
}

void push_ctx(lua_State* L, const Input& input) {
  const auto& in = std::get<RedundancyInput>(input);
  lua_newtable(L);
  set_number(L, "groups", in.groups);
  set_number(L, "redundancy", in.redundancy);
  lua_io::push_bools(L, in.alive);
  lua_setfield(L, -2, "alive");
  if (in.has_current) {
    push_stacks(L, in.current);
    lua_setfield(L, -2, "current");
  }
}

Result<Input> read_ctx(lua_State* L, int idx, lua::Meter& m) {
  if (lua_type(L, idx) != LUA_TTABLE) return fail("ctx must be a table");
  RedundancyInput in;
  auto groups = lua_io::read_field_uint(L, idx, "groups", 1, 1u << 20);
  if (!groups) return groups.error();
  in.groups = *groups;
  int red = lua_io::field(L, idx, "redundancy");
  auto r = lua_isnil(L, red) ? Result<uint32_t>(0u) : lua_io::read_uint(L, red, "redundancy", 0, in.groups);
  lua_pop(L, 1);
  if (!r) return r.error();
  in.redundancy = *r;
  int a = lua_io::field(L, idx, "alive");
  if (lua_isnil(L, a)) {
    in.alive.assign(in.groups, true);
  } else {
    auto alive = lua_io::read_bools(L, m, a, "alive");
    if (!alive) {
      lua_pop(L, 1);
      return alive.error();
    }
    in.alive = std::move(*alive);
  }
  lua_pop(L, 1);
  if (in.alive.size() != in.groups) return fail("alive has ", in.alive.size(), " entries for ", in.groups, " groups");
  return Input(std::move(in));
}

// Whether every shard type a group hosts has two hosts among the groups `alive`.
bool masks_another(const std::vector<std::vector<uint32_t>>& hosts, const std::vector<bool>& alive) {
  std::map<uint32_t, uint32_t> up;
  for (size_t g = 0; g < hosts.size(); ++g)
    for (uint32_t t : hosts[g]) up[t] += g < alive.size() && alive[g];
  return std::all_of(up.begin(), up.end(), [](const auto& kv) { return kv.second >= 2; });
}

Result<plan::AfterPatch> read_after_patch(lua_State* L, int idx, const plan::ShardStacks& s) {
  int a = lua_io::field(L, idx, "after_patch");
  const int type = lua_type(L, a);
  std::string v = type == LUA_TSTRING ? lua_tostring(L, a) : "";
  lua_pop(L, 1);
  if (type == LUA_TNIL) return masks_another(s.hosts, s.alive) ? plan::AfterPatch::cheaper : plan::AfterPatch::regroup;
  for (auto k : {plan::AfterPatch::cheaper, plan::AfterPatch::degraded, plan::AfterPatch::regroup})
    if (v == plan::after_patch_name(k)) return k;
  return fail("after_patch must be \"cheaper\", \"degraded\" or \"regroup\"",
              type == LUA_TSTRING ? ", not \"" + v + "\"" : std::string(", not a ") + lua_typename(L, type));
}

Result<bool> read_spread(lua_State* L, int idx) {
  int f = lua_io::field(L, idx, "spread");
  const int type = lua_type(L, f);
  const bool v = lua_toboolean(L, f);
  lua_pop(L, 1);
  if (type != LUA_TNIL && type != LUA_TBOOLEAN)
    return fail("spread must be true or false, not a ", lua_typename(L, type));
  return v;
}

Result<Proposal> read(lua_State* L, int idx, const Input& input, lua::Meter& m) {
  const auto& in = std::get<RedundancyInput>(input);
  if (lua_type(L, idx) != LUA_TTABLE) return fail("the proposal must be a table { r, hosts, assignment }");
  SAL_TRY(lua_io::only_keys(L, idx, {"r", "hosts", "assignment", "wipeout", "after_patch", "spread"},
                            "redundancy proposal"));
  plan::ShardStacks s;
  uint32_t g = std::max<uint32_t>(in.groups, 1);
  int r = lua_io::field(L, idx, "r");
  auto red = lua_io::read_uint(L, r, "r", 1, g);
  lua_pop(L, 1);
  if (!red) return red.error();
  s.redundancy = *red;
  for (auto [key, out] : {std::pair{"hosts", &s.hosts}, std::pair{"assignment", &s.assignment}}) {
    int f = lua_io::field(L, idx, key);
    auto v = lua_io::read_uints2(L, m, f, key, 1, g, 1);
    lua_pop(L, 1);
    if (!v) return v.error();
    *out = std::move(*v);
  }
  int w = lua_io::field(L, idx, "wipeout");
  s.wipeout = lua_toboolean(L, w);
  lua_pop(L, 1);
  auto spread = read_spread(L, idx);
  if (!spread) return spread.error();
  s.spread = *spread;
  s.alive = in.alive;
  auto after = read_after_patch(L, idx, s);
  if (!after) return after.error();
  s.after_patch = *after;
  return Proposal(std::move(s));
}

Status validate(const Proposal& proposal, const Input& input) {
  const auto& s = std::get<RedundancyProposal>(proposal);
  const auto& in = std::get<RedundancyInput>(input);
  if (s.hosts.size() != in.groups) return fail("hosts has ", s.hosts.size(), " groups, the job has ", in.groups);
  for (size_t g = 0; g < s.hosts.size(); ++g)
    if (s.hosts[g].size() > s.redundancy)
      return fail("group ", g + plan::kLuaIds, " hosts ", s.hosts[g].size(), " shard types, more than r = ", s.redundancy);
  if (in.redundancy && s.redundancy != in.redundancy)
    return fail("r = ", s.redundancy, " but the job asks for r = ", in.redundancy);
  return plan::check_stacks(s, in.groups, plan::kLuaIds);
}

Proposal floor_policy(const Input& input) {
  const auto& in = std::get<RedundancyInput>(input);
  plan::ShardStacks s;
  s.alive = in.alive;
  for (uint32_t g = 0; g < in.groups; ++g) {
    s.hosts.push_back({g});
    bool up = g < in.alive.size() && in.alive[g];
    s.assignment.push_back(up ? std::vector<uint32_t>{g} : std::vector<uint32_t>{});
    s.wipeout |= !up;
  }
  return s;
}

std::string summary(const Proposal& proposal) {
  const auto& s = std::get<RedundancyProposal>(proposal);
  if (s.wipeout) return "r = " + std::to_string(s.redundancy) + ", wiped out: a shard type lost every host";
  return "r = " + std::to_string(s.redundancy) + " over " + std::to_string(s.hosts.size()) + " groups, depth " +
         std::to_string(s.depth());
}

std::string diff(const Proposal& before, const Proposal& after) {
  const auto& a = std::get<RedundancyProposal>(before);
  const auto& b = std::get<RedundancyProposal>(after);
  size_t changed = 0;
  for (size_t g = 0; g < std::min(a.assignment.size(), b.assignment.size()); ++g) changed += a.assignment[g] != b.assignment[g];
  if (changed == 0 && a.hosts == b.hosts && a.redundancy == b.redundancy) return "same stacks";
  return "r " + std::to_string(a.redundancy) + " -> " + std::to_string(b.redundancy) + ", depth " +
         std::to_string(a.depth()) + " -> " + std::to_string(b.depth()) + ", " + std::to_string(changed) +
         " groups change what they compute" + (a.hosts != b.hosts ? ", hosts change" : "");
}

nlohmann::ordered_json to_json(const Proposal& proposal) {
  const auto& s = std::get<RedundancyProposal>(proposal);
  nlohmann::ordered_json j;
  j["r"] = s.redundancy;
  j["hosts"] = s.hosts;
  j["assignment"] = s.assignment;
  j["wipeout"] = s.wipeout;
  j["after_patch"] = plan::after_patch_name(s.after_patch);
  j["spread"] = s.spread;
  j["depth"] = s.depth();
  return j;
}

}  // namespace

const KindOps& redundancy_ops() {
  static const KindOps ops{push_ctx, read_ctx, read, validate, floor_policy, summary, diff, to_json};
  return ops;
}

}  // namespace sal::policy
