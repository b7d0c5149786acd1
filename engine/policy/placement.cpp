// placement.cpp — the placement kind: which node slot holds which expert replica.
//   ctx      = { nodes, slots, experts, layers, floor, replicas = {{r_e}...}, loads = {{t_e}...},
//                current = {{{experts of node 1}, ...}, ...per layer} or nil,
//                failures = {rate, source, correlated, window_s, restore_s, restore_source},
//                hosts = {workers of host 1, ...} or nil (nil: one worker per host),
//                racks = {rack of host 1, ...} or nil (mesh.racks; nil: none named),
//                steps = {{{tokens of expert 1, ...} per layer} per step} or nil (the load window's
//                        recent steps, oldest first: each step's own routing; nil: none measured),
//                dispatch = "counts" | "even" (train.dispatch: how a step's tokens are split),
//                moves = {replica_s, horizon_s, source} or nil (what re-placing costs: a replica's
//                        fetch in a plan switch, measured, and how long a placement stands; nil
//                        until a switch that moved experts was measured) }
//   proposal = { placement = {{{experts of node 1's slots}, {node 2}, ...}, ...per layer},
//                note = "why, for people"?, choice = {the same as plain data}? }
// Experts and nodes are 1-based in Lua. With hosts, the engine deals the nodes (positions) onto the
// hosts after the decision, spreading each expert's replicas over as many hosts as it can
// (plan/domains.h): a policy places over workers and needs no host logic. The floor policy is round robin ("spread"): the replica
// list, expert by expert, dealt to nodes in turn, so an expert's replicas land on distinct nodes.
#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/strings.h"
#include "lua/convert.h"
#include "plan/validate.h"
#include "policy/failure_facts.h"
#include "policy/kinds.h"
#include "policy/lua_io.h"

namespace sal::policy {
namespace {

using lua_io::set_number;

void push_ctx(lua_State* L, const Input& input) {
  const auto& in = std::get<PlacementInput>(input);
  lua_newtable(L);
  set_number(L, "nodes", in.nodes);
  set_number(L, "slots", in.slots);
  set_number(L, "experts", in.experts);
  set_number(L, "layers", double(in.replicas.size()));
  set_number(L, "floor", in.floor);
  lua_io::push_uints2(L, in.replicas);
  lua_setfield(L, -2, "replicas");
  lua_io::push_numbers2(L, in.loads);
  lua_setfield(L, -2, "loads");
  if (!in.current.empty()) {
    lua_io::push_uints3(L, in.current, 1);
    lua_setfield(L, -2, "current");
  }
  const FailureFacts f = in.failures.rate > 0 ? in.failures : assumed_failures();
  lua_newtable(L);
  set_number(L, "rate", f.rate);
  lua_io::set_string(L, "source", f.source);
  set_number(L, "correlated", f.correlated);
  set_number(L, "window_s", f.window_s);
  set_number(L, "restore_s", f.restore_s);
  lua_io::set_string(L, "restore_source", f.restore_source);
  lua_setfield(L, -2, "failures");
  if (!in.hosts.empty()) {
    lua_io::push_numbers(L, std::vector<double>(in.hosts.begin(), in.hosts.end()));
    lua_setfield(L, -2, "hosts");
  }
  if (!in.steps.empty()) {
    lua_io::push_uints3(L, in.steps);
    lua_setfield(L, -2, "steps");
  }
  lua_io::set_string(L, "dispatch", in.dispatch_by_counts ? "counts" : "even");
  if (in.moves.replica_s > 0 && in.moves.horizon_s > 0) {
    lua_newtable(L);
    set_number(L, "replica_s", in.moves.replica_s);
    set_number(L, "horizon_s", in.moves.horizon_s);
    lua_io::set_string(L, "source", in.moves.source);
    lua_setfield(L, -2, "moves");
  }
  if (!in.racks.empty()) {
    std::vector<double> one_based;
    for (uint32_t r : in.racks) one_based.push_back(double(r) + 1);
    lua_io::push_numbers(L, one_based);
    lua_setfield(L, -2, "racks");
  }
}

// ctx.failures written by hand (policy.decide): the numbers that are given, the rest assumed.
Result<FailureFacts> read_failures(lua_State* L, int idx) {
  FailureFacts f = assumed_failures();
  if (lua_isnil(L, idx)) return f;
  if (!lua_istable(L, idx)) return fail("failures must be a table {rate, correlated, window_s, restore_s, ...}");
  SAL_TRY(lua_io::only_keys(L, idx, {"rate", "source", "correlated", "window_s", "restore_s", "restore_source"},
                            "failures"));
  for (auto [key, out] : {std::pair{"rate", &f.rate}, std::pair{"correlated", &f.correlated},
                          std::pair{"window_s", &f.window_s}, std::pair{"restore_s", &f.restore_s}}) {
    auto v = lua_io::read_field_number(L, idx, key, "failures", *out);
    if (!v) return v.error();
    *out = *v;
  }
  const bool rate_given = !lua_isnil(L, lua_io::field(L, idx, "rate"));
  lua_pop(L, 1);
  if (rate_given) f.source = "given in ctx";
  if (!(f.rate > 0)) return fail("failures.rate must be > 0 (node failures per node and hour)");
  return f;
}

// ctx.moves written by hand: both times > 0.
Result<MoveFacts> read_moves(lua_State* L, int idx) {
  MoveFacts m;
  if (lua_isnil(L, idx)) return m;
  if (!lua_istable(L, idx)) return fail("moves must be a table {replica_s, horizon_s, source}");
  SAL_TRY(lua_io::only_keys(L, idx, {"replica_s", "horizon_s", "source"}, "moves"));
  for (auto [key, out] : {std::pair{"replica_s", &m.replica_s}, std::pair{"horizon_s", &m.horizon_s}}) {
    auto v = lua_io::read_field_number(L, idx, key, "moves", 0);
    if (!v) return v.error();
    if (!(*v > 0)) return fail("moves.", key, " must be > 0 (seconds)");
    *out = *v;
  }
  m.source = "given in ctx";
  return m;
}

// ctx.steps and ctx.dispatch written by hand: every step a layer per layer of ctx.replicas.
Status read_steps(lua_State* L, int idx, lua::Meter& m, PlacementInput& in) {
  const int s = lua_io::field(L, idx, "steps");
  if (!lua_isnil(L, s)) {
    auto steps = lua_io::read_uints3(L, m, s, "steps", 0, UINT32_MAX);
    lua_pop(L, 1);
    if (!steps) return steps.error();
    for (size_t i = 0; i < steps->size(); ++i)
      if ((*steps)[i].size() != in.replicas.size())
        return fail("steps[", i + 1, "]: ", (*steps)[i].size(), " layers, not the ", in.replicas.size(), " of replicas");
    in.steps = std::move(*steps);
  } else {
    lua_pop(L, 1);
  }
  const int d = lua_io::field(L, idx, "dispatch");
  const bool given = !lua_isnil(L, d), text = lua_type(L, d) == LUA_TSTRING;
  const std::string dispatch = text ? clip(lua_tostring(L, d), 16) : "counts";
  lua_pop(L, 1);
  if (given && !text) return fail("dispatch must be \"counts\" or \"even\"");
  if (dispatch != "counts" && dispatch != "even")
    return fail("dispatch must be \"counts\" or \"even\", not \"", dispatch, "\"");
  in.dispatch_by_counts = dispatch == "counts";
  return {};
}

Result<Input> read_ctx(lua_State* L, int idx, lua::Meter& m) {
  if (lua_type(L, idx) != LUA_TTABLE) return fail("ctx must be a table");
  PlacementInput in;
  for (auto [key, out] : {std::pair{"nodes", &in.nodes}, std::pair{"slots", &in.slots},
                          std::pair{"experts", &in.experts}, std::pair{"floor", &in.floor}}) {
    auto v = lua_io::read_field_uint(L, idx, key, 1, 1u << 24);
    if (!v) return v.error();
    *out = *v;
  }
  // The plan a ctx describes is nodes x slots entries (a floor policy builds it in C++): counted.
  SAL_TRY(m.values(uint64_t(in.nodes) * in.slots));
  int r = lua_io::field(L, idx, "replicas");
  auto reps = lua_io::read_uints2(L, m, r, "replicas", 1, 1u << 24);
  lua_pop(L, 1);
  if (!reps) return reps.error();
  in.replicas = std::move(*reps);
  int lo = lua_io::field(L, idx, "loads");
  if (!lua_isnil(L, lo)) {
    auto loads = lua_io::read_numbers2(L, m, lo, "loads");
    if (!loads) {
      lua_pop(L, 1);
      return loads.error();
    }
    in.loads = std::move(*loads);
  } else {
    for (const auto& layer : in.replicas) in.loads.emplace_back(layer.size(), 1.0);
  }
  lua_pop(L, 1);
  int c = lua_io::field(L, idx, "current");
  if (!lua_isnil(L, c)) {
    auto cur = lua_io::read_uints3(L, m, c, "current", 1, in.experts, 1);
    if (!cur) {
      lua_pop(L, 1);
      return cur.error();
    }
    in.current = std::move(*cur);
  }
  lua_pop(L, 1);
  auto failures = read_failures(L, lua_io::field(L, idx, "failures"));
  lua_pop(L, 1);
  if (!failures) return failures.error();
  in.failures = std::move(*failures);
  int h = lua_io::field(L, idx, "hosts");
  if (!lua_isnil(L, h)) {
    auto hosts = lua_io::read_uints(L, m, h, "hosts", 1, in.nodes);
    lua_pop(L, 1);
    if (!hosts) return hosts.error();
    uint64_t sum = 0;
    for (uint32_t n : *hosts) sum += n;
    if (sum != in.nodes) return fail("hosts: the hosts' workers add up to ", sum, ", not nodes = ", in.nodes);
    in.hosts = std::move(*hosts);
  } else {
    lua_pop(L, 1);
  }
  int rk = lua_io::field(L, idx, "racks");
  if (!lua_isnil(L, rk)) {
    auto racks = lua_io::read_uints(L, m, rk, "racks", 1, uint32_t(std::max<size_t>(1, in.hosts.size())));
    lua_pop(L, 1);
    if (!racks) return racks.error();
    if (racks->size() != in.hosts.size())
      return fail("racks: ", racks->size(), " racks for ", in.hosts.size(), " hosts (one per host of ctx.hosts)");
    for (uint32_t& x : *racks) --x;
    in.racks = std::move(*racks);
  } else {
    lua_pop(L, 1);
  }
  SAL_TRY(read_steps(L, idx, m, in));
  auto moves = read_moves(L, lua_io::field(L, idx, "moves"));
  lua_pop(L, 1);
  if (!moves) return moves.error();
  in.moves = std::move(*moves);
  return Input(std::move(in));
}

Result<Proposal> read(lua_State* L, int idx, const Input& input, lua::Meter& m) {
  const auto& in = std::get<PlacementInput>(input);
  if (lua_type(L, idx) != LUA_TTABLE) return fail("the proposal must be a table { placement = ... }");
  SAL_TRY(lua_io::only_keys(L, idx, {"placement", "note", "choice"}, "placement proposal"));
  int f = lua_io::field(L, idx, "placement");
  auto pl = lua_io::read_uints3(L, m, f, "placement", 1, std::max<uint32_t>(in.experts, 1), 1);
  lua_pop(L, 1);
  if (!pl) return pl.error();
  PlacementProposal p{std::move(*pl), "", ""};
  int note = lua_io::field(L, idx, "note");
  if (!lua_isnil(L, note) && !lua_isstring(L, note)) return lua_pop(L, 1), fail("note must be a string");
  if (!lua_isnil(L, note)) p.note = lua_tostring(L, note);
  lua_pop(L, 1);
  int choice = lua_io::field(L, idx, "choice");
  if (!lua_isnil(L, choice) && !lua_istable(L, choice)) return lua_pop(L, 1), fail("choice must be a table of plain data");
  if (!lua_isnil(L, choice)) {
    auto j = lua::to_json(L, choice, m);
    if (!j) return lua_pop(L, 1), j.error().with_context("choice");
    p.choice = j->dump();
  }
  lua_pop(L, 1);
  return Proposal(std::move(p));
}

plan::LayerPlan layer_of(const PlacementProposal& p, const PlacementInput& in, size_t l) {
  return plan::LayerPlan{in.replicas[l], p.placement[l]};
}

Status validate(const Proposal& proposal, const Input& input) {
  const auto& p = std::get<PlacementProposal>(proposal);
  const auto& in = std::get<PlacementInput>(input);
  if (p.placement.size() != in.replicas.size())
    return fail("placement has ", p.placement.size(), " layers, the allocation has ", in.replicas.size());
  for (size_t l = 0; l < p.placement.size(); ++l)
    if (auto s = plan::check_placement(layer_of(p, in, l), in.experts, in.nodes, in.slots, in.floor, plan::kLuaIds); !s)
      return Error("layer " + std::to_string(l + plan::kLuaIds) + ": " + s.error().message());
  return {};
}

Proposal floor_policy(const Input& input) {
  const auto& in = std::get<PlacementInput>(input);
  PlacementProposal p;
  for (const auto& reps : in.replicas) {
    std::vector<std::vector<uint32_t>> nodes(in.nodes);
    uint64_t k = 0;
    for (uint32_t e = 0; e < reps.size(); ++e)
      for (uint32_t i = 0; i < reps[e]; ++i, ++k) nodes[k % in.nodes].push_back(e);
    p.placement.push_back(std::move(nodes));
  }
  return p;
}

std::string summary(const Proposal& proposal) {
  const auto& p = std::get<PlacementProposal>(proposal);
  size_t nodes = p.placement.empty() ? 0 : p.placement[0].size();
  size_t slots = nodes ? p.placement[0][0].size() : 0;
  return std::to_string(p.placement.size()) + " layers on " + std::to_string(nodes) + " nodes x " +
         std::to_string(slots) + " slots";
}

// Replicas of `after` a node does not already hold in `before` (multiset difference).
size_t moved_into(std::vector<uint32_t> before, const std::vector<uint32_t>& after) {
  size_t moved = 0;
  for (uint32_t e : after) {
    auto it = std::find(before.begin(), before.end(), e);
    if (it == before.end()) {
      ++moved;
    } else {
      before.erase(it);
    }
  }
  return moved;
}

std::string diff(const Proposal& before, const Proposal& after) {
  const auto& a = std::get<PlacementProposal>(before);
  const auto& b = std::get<PlacementProposal>(after);
  if (a.placement.size() != b.placement.size()) return "different number of layers";
  std::string out;
  size_t total_nodes = 0, total_moved = 0;
  for (size_t l = 0; l < a.placement.size(); ++l) {
    if (a.placement[l].size() != b.placement[l].size()) return "layer " + std::to_string(l) + ": different node count";
    size_t nodes = 0, moved = 0;
    for (size_t n = 0; n < a.placement[l].size(); ++n) {
      size_t m = moved_into(a.placement[l][n], b.placement[l][n]);
      nodes += m > 0;
      moved += m;
    }
    total_nodes += nodes;
    total_moved += moved;
    if (moved)
      out += "\n  layer " + std::to_string(l) + ": " + std::to_string(nodes) + " of " +
             std::to_string(a.placement[l].size()) + " nodes change, " + std::to_string(moved) + " replicas move";
  }
  if (total_moved == 0) return "same placement";
  return std::to_string(total_moved) + " replicas move on " + std::to_string(total_nodes) + " node-layers:" + out;
}

nlohmann::ordered_json to_json(const Proposal& proposal) {
  const auto& p = std::get<PlacementProposal>(proposal);
  nlohmann::ordered_json j;
  j["placement"] = p.placement;
  if (!p.note.empty()) j["note"] = p.note;
  if (!p.choice.empty()) j["choice"] = nlohmann::ordered_json::parse(p.choice, nullptr, false);
  return j;
}

}  // namespace

const KindOps& placement_ops() {
  static const KindOps ops{push_ctx, read_ctx, read, validate, floor_policy, summary, diff, to_json};
  return ops;
}

}  // namespace sal::policy
