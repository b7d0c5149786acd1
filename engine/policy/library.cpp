// library.cpp — see library.h. Every function checks its arguments and raises a Lua error naming
// the function and the argument; none throws through Lua. Their long loops stop at the calling
// budget's deadline (core/deadline.h), and then the budget's error is raised.
#include "policy/library.h"

#include <lua.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include "lua/sandbox.h"
#include "plan/remap.h"
#include "plan/validate.h"
#include "policy/algo/flow.h"
#include "policy/algo/golomb.h"
#include "policy/algo/matching.h"
#include "policy/algo/moetion.h"
#include "policy/algo/placement_balance.h"
#include "policy/algo/placement_search.h"
#include "policy/algo/recovery.h"
#include "policy/algo/spare.h"
#include "policy/library_values.h"
#include "policy/lua_io.h"

namespace sal::policy {
namespace {

std::vector<double> numbers_arg(lua_State* L, int idx, const char* fn) {
  int n = lua_io::sequence_length(L, idx);
  if (n < 0) luaL_error(L, "%s: argument %d must be a list of numbers", fn, idx);
  std::vector<double> v(static_cast<size_t>(n));
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);
    if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "%s: element %d of argument %d is not a number", fn, i, idx);
    v[size_t(i - 1)] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  return v;
}

uint32_t uint_arg(lua_State* L, int idx, const char* fn, const char* what) {
  double x = luaL_checknumber(L, idx);
  if (x < 0 || x != double(uint32_t(x))) luaL_error(L, "%s: %s must be a non-negative integer", fn, what);
  return uint32_t(x);
}

// A size the function allocates by (groups, nodes, failures, a ruler's modulus): at most what the
// policy's memory cap allows in values (lua_io::read_limits), so no number a policy passes makes
// the C++ side hold more than its state may.
uint32_t size_arg(lua_State* L, int idx, const char* fn, const char* what, uint64_t times = 1) {
  uint32_t n = uint_arg(L, idx, fn, what);
  size_t most = lua_io::read_limits(L, fn).values.max;
  if (uint64_t(n) * std::max<uint64_t>(times, 1) > most)
    luaL_error(L, "%s: %s = %u asks for more than the policy's memory cap allows (%llu values)", fn, what, n,
               (unsigned long long)most);
  return n;
}

// sal.effective_floor(f, nodes, slots, experts) -> f', note
int l_effective_floor(lua_State* L) {
  const char* fn = "sal.effective_floor";
  auto fl = plan::effective_floor(uint_arg(L, 1, fn, "f"), uint_arg(L, 2, fn, "nodes"), uint_arg(L, 3, fn, "slots"),
                                  uint_arg(L, 4, fn, "experts"));
  lua_pushnumber(L, fl.f);
  lua_pushstring(L, fl.note.c_str());
  return 2;
}

// sal.argsort(values [, "desc"]) -> 1-based indices ordered by value, ties by index (stable)
int l_argsort(lua_State* L) {
  auto v = numbers_arg(L, 1, "sal.argsort");
  bool desc = lua_isstring(L, 2) && std::string(lua_tostring(L, 2)) == "desc";
  std::vector<uint32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return desc ? v[a] > v[b] : v[a] < v[b]; });
  lua_io::push_uints(L, idx, 1);
  return 1;
}

// A placement argument: a list of layers of nodes of 1-based expert ids, or one layer.
std::vector<algo::LayerPlacement> placement_arg(lua_State* L, int idx, const char* fn) {
  if (!lua_istable(L, idx)) luaL_error(L, "%s: argument %d must be a placement (a list of nodes' expert lists)", fn, idx);
  lua_rawgeti(L, idx, 1);
  bool one_layer = false;
  if (lua_istable(L, -1)) {
    lua_rawgeti(L, -1, 1);
    one_layer = lua_type(L, -1) == LUA_TNUMBER;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  std::vector<std::vector<std::vector<uint32_t>>> layers;
  if (one_layer) {
    lua::Meter args = arg_meter(L, fn);
    layers.push_back(value_or_raise(L, lua_io::read_uints2(L, args, idx, "placement", 1, UINT32_MAX, 1), fn));
  } else {
    lua::Meter args = arg_meter(L, fn);
    layers = value_or_raise(L, lua_io::read_uints3(L, args, idx, "placement", 1, UINT32_MAX, 1), fn);
  }
  std::vector<algo::LayerPlacement> out;
  for (const auto& l : layers) out.push_back(to_layer(l));
  return out;
}

void push_estimate(lua_State* L, const algo::RecoveryEstimate& e) {
  lua_newtable(L);
  lua_io::set_number(L, "failures", e.failures);
  lua_io::set_number(L, "p", e.p);
  lua_io::set_number(L, "lo", e.lo);
  lua_io::set_number(L, "hi", e.hi);
  lua_io::set_string(L, "method", std::string(algo::method_name(e.method)));
}

// sal.recovery(placement, k) -> {p, lo, hi, method, layers = {p, ...}}
int l_recovery(lua_State* L) {
  const char* fn = "sal.recovery";
  auto layers = placement_arg(L, 1, fn);
  auto k = size_arg(L, 2, fn, "k");
  auto rep = value_or_raise(L, algo::recovery_report(layers, int(k)), fn);
  push_estimate(L, rep.joint);
  std::vector<double> per;
  for (const auto& l : rep.layers) per.push_back(l.p);
  lua_io::push_numbers(L, per);
  lua_setfield(L, -2, "layers");
  return 1;
}

// sal.recovery_curve(placement, K) -> {{failures = 0, p, method, ...}, ...} for k = 0..K (joint)
int l_recovery_curve(lua_State* L) {
  const char* fn = "sal.recovery_curve";
  auto layers = placement_arg(L, 1, fn);
  auto k = size_arg(L, 2, fn, "K");
  auto curve = value_or_raise(L, algo::recovery_curve(layers, int(k)), fn);
  lua_createtable(L, int(curve.size()), 0);
  for (size_t i = 0; i < curve.size(); ++i) {
    push_estimate(L, curve[i]);
    lua_rawseti(L, -2, int(i + 1));
  }
  return 1;
}

// sal.matching(n_left, n_right, adj) -> size, left_to_right (1-based, 0 = unmatched)
int l_matching(lua_State* L) {
  const char* fn = "sal.matching";
  auto nl = size_arg(L, 1, fn, "n_left"), nr = size_arg(L, 2, fn, "n_right");
  lua::Meter args = arg_meter(L, fn);
  auto adj = value_or_raise(L, lua_io::read_uints2(L, args, 3, "adj", 1, std::max<uint32_t>(nr, 1), 1), fn);
  std::vector<std::vector<int>> a;
  for (const auto& row : adj) a.emplace_back(row.begin(), row.end());
  if (auto s = algo::check_bipartite(int(nl), int(nr), a); !s) luaL_error(L, "%s: %s", fn, s.error().message().c_str());
  auto m = algo::hopcroft_karp(int(nl), int(nr), a);
  lua_pushnumber(L, m.size);
  lua_createtable(L, int(nl), 0);
  for (size_t i = 0; i < m.left_to_right.size(); ++i) {
    lua_pushnumber(L, m.left_to_right[i] + 1);
    lua_rawseti(L, -2, int(i + 1));
  }
  return 2;
}

// sal.min_cost_flow(nodes, edges = {{from, to, cap, cost}, ...}, s, t [, max]) -> flow, cost, per-edge flow
int l_min_cost_flow(lua_State* L) {
  const char* fn = "sal.min_cost_flow";
  auto n = size_arg(L, 1, fn, "nodes");
  int m = lua_io::sequence_length(L, 2);
  if (m < 0) return luaL_error(L, "%s: edges must be a list of {from, to, capacity, cost}", fn);
  algo::MinCostFlow g{static_cast<int>(n)};
  for (int i = 1; i <= m; ++i) {
    lua_rawgeti(L, 2, i);
    if (!lua_istable(L, -1)) return luaL_error(L, "%s: edge %d must be a list {from, to, capacity, cost}", fn, i);
    double e[4];
    for (int k = 0; k < 4; ++k) {
      lua_rawgeti(L, -1, k + 1);
      if (lua_type(L, -1) != LUA_TNUMBER) return luaL_error(L, "%s: edge %d needs 4 numbers", fn, i);
      e[k] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    value_or_raise(L, g.add_edge(int(e[0]) - 1, int(e[1]) - 1, int64_t(e[2]), int64_t(e[3])), fn);
  }
  auto s = uint_arg(L, 3, fn, "s"), t = uint_arg(L, 4, fn, "t");
  int64_t cap = lua_isnoneornil(L, 5) ? algo::MinCostFlow::kUnlimited : int64_t(luaL_checknumber(L, 5));
  auto r = value_or_raise(L, g.solve(int(s) - 1, int(t) - 1, cap), fn);
  lua_pushnumber(L, double(r.flow));
  lua_pushnumber(L, double(r.cost));
  lua_createtable(L, m, 0);
  for (int i = 0; i < m; ++i) {
    lua_pushnumber(L, double(g.flow_on(i)));
    lua_rawseti(L, -2, i + 1);
  }
  return 3;
}

std::vector<std::vector<uint32_t>> to_uints(const std::vector<std::vector<int>>& v) {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& row : v) out.emplace_back(row.begin(), row.end());
  return out;
}

// sal.golomb(N, r) -> marks (offsets from 0)
int l_golomb(lua_State* L) {
  const char* fn = "sal.golomb";
  auto marks = value_or_raise(L, algo::cyclic_golomb_ruler(int(size_arg(L, 1, fn, "N")), int(size_arg(L, 2, fn, "r"))), fn);
  lua_io::push_uints(L, std::vector<uint32_t>(marks.begin(), marks.end()));
  return 1;
}

// sal.spare_layout(N, r) -> hosts: per group its shard types (1-based) in stack order
int l_spare_layout(lua_State* L) {
  const char* fn = "sal.spare_layout";
  auto r = size_arg(L, 2, fn, "r");
  auto layout = value_or_raise(L, algo::spare_layout(int(size_arg(L, 1, fn, "N", r)), int(r)), fn);
  lua_io::push_uints2(L, to_uints(layout.hosted), 1);
  return 1;
}

// sal.spare_reorder(stacks, alive) -> {outcome, depth, stacks, provider, moves, lost}
int l_spare_reorder(lua_State* L) {
  const char* fn = "sal.spare_reorder";
  lua::Meter args = arg_meter(L, fn);
  auto stacks = value_or_raise(L, lua_io::read_uints2(L, args, 1, "stacks", 1, UINT32_MAX, 1), fn);
  auto alive = value_or_raise(L, lua_io::read_bools(L, args, 2, "alive"), fn);
  algo::ShardStacks st;
  st.shard_types = int(stacks.size());
  for (const auto& row : stacks) st.stacks.emplace_back(row.begin(), row.end());
  st.alive = alive;
  auto r = value_or_raise(L, algo::reorder(st), fn);
  const char* outcome = r.outcome == algo::ReorderOutcome::kept ? "kept"
                        : r.outcome == algo::ReorderOutcome::reordered ? "reordered" : "wiped_out";
  lua_newtable(L);
  lua_io::set_string(L, "outcome", outcome);
  lua_io::set_number(L, "depth", r.depth);
  lua_io::set_number(L, "moves", r.moves);
  lua_io::push_uints2(L, to_uints(r.stacks), 1);
  lua_setfield(L, -2, "stacks");
  std::vector<uint32_t> provider;
  for (int g : r.provider) provider.push_back(uint32_t(g + 1));  // -1 -> 0 (none)
  lua_io::push_uints(L, provider);
  lua_setfield(L, -2, "provider");
  lua_io::push_uints(L, std::vector<uint32_t>(r.lost.begin(), r.lost.end()), 1);
  lua_setfield(L, -2, "lost");
  return 1;
}

// The SPARe closed forms, one number each.
int l_spare_mu(lua_State* L) {
  const char* fn = "sal.spare_mu";
  lua_pushnumber(L, value_or_raise(L, algo::mean_failures_endured(int(size_arg(L, 1, fn, "N")), int(size_arg(L, 2, fn, "r"))), fn));
  return 1;
}
int l_spare_r_star(lua_State* L) {
  lua_pushnumber(L, value_or_raise(L, algo::optimal_redundancy(int(size_arg(L, 1, "sal.spare_r_star", "N"))), "sal.spare_r_star"));
  return 1;
}
int l_spare_min_depth(lua_State* L) {
  const char* fn = "sal.spare_min_depth";
  lua_pushnumber(L, value_or_raise(L, algo::min_depth_bound(int(size_arg(L, 1, fn, "N")), int(size_arg(L, 2, fn, "k"))), fn));
  return 1;
}

std::vector<algo::CheckpointOperator> operators_arg(lua_State* L, int idx, const char* fn) {
  int n = lua_io::sequence_length(L, idx);
  if (n <= 0) luaL_error(L, "%s: operators must be a non-empty list", fn);
  std::vector<algo::CheckpointOperator> ops;
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);
    int o = lua_gettop(L);
    algo::CheckpointOperator op;
    auto num = [&](const char* key) {
      auto v = lua_io::read_field_number(L, o, key, "operators[" + std::to_string(i) + "]", 0);
      return value_or_raise(L, std::move(v), fn);
    };
    op.full_bytes = uint64_t(num("full_bytes"));
    op.compute_bytes = uint64_t(num("compute_bytes"));
    op.popularity = num("popularity");
    op.expert = lua_io::read_field_string(L, o, "kind", "expert", 16) == "expert";
    lua_settop(L, o - 1);
    ops.push_back(op);
  }
  return ops;
}

// sal.moetion_window(operators, iteration_s, bandwidth) -> {window, iterations = {{op ids}...}, snapshot_bytes, budget}
int l_moetion_window(lua_State* L) {
  const char* fn = "sal.moetion_window";
  auto ops = operators_arg(L, 1, fn);
  auto w = value_or_raise(L, algo::find_window(ops, luaL_checknumber(L, 2), luaL_checknumber(L, 3)), fn);
  lua_newtable(L);
  lua_io::set_number(L, "window", w.window);
  lua_io::set_number(L, "budget", w.budget_bytes);
  lua_io::push_uints2(L, to_uints(w.iterations), 1);
  lua_setfield(L, -2, "iterations");
  std::vector<double> bytes(w.snapshot_bytes.begin(), w.snapshot_bytes.end());
  lua_io::push_numbers(L, bytes);
  lua_setfield(L, -2, "snapshot_bytes");
  return 1;
}

// sal.moetion_reorder(before, after) -> reorder (bool), changed, experts
int l_moetion_reorder(lua_State* L) {
  const char* fn = "sal.moetion_reorder";
  auto r = value_or_raise(L, algo::check_reorder(numbers_arg(L, 1, fn), numbers_arg(L, 2, fn)), fn);
  lua_pushboolean(L, r.reorder);
  lua_pushnumber(L, r.changed);
  lua_pushnumber(L, r.experts);
  return 3;
}

// sal.balance_placement(nodes, loads [, {floor, evaluations}]) -> nodes, info
// One layer (1-based expert ids per node) and each expert's load (loads[e]); the same layer with
// the work spread more evenly and the same minimal node sets (placement_balance.h), and info =
// {before, after (busiest node's work over the mean), moves, evaluations}.
int l_balance_placement(lua_State* L) {
  const char* fn = "sal.balance_placement";
  lua::Meter args = arg_meter(L, fn);
  auto nodes = value_or_raise(L, lua_io::read_uints2(L, args, 1, "placement", 1, UINT32_MAX, 1), fn);
  const std::vector<double> loads = numbers_arg(L, 2, fn);
  algo::BalanceOptions o;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    if (auto keys = lua_io::only_keys(L, 3, {"floor", "evaluations"}, "options"); !keys)
      luaL_error(L, "%s: %s", fn, keys.error().message().c_str());
    o.floor = int(value_or_raise(L, lua_io::read_field_number(L, 3, "floor", "options", 1), fn));
    o.max_evaluations = uint64_t(value_or_raise(L, lua_io::read_field_number(L, 3, "evaluations", "options", 0), fn));
  }
  auto r = value_or_raise(L, algo::balance_placement(to_layer(nodes), loads, o), fn);
  push_layer(L, r.layer);
  lua_newtable(L);
  lua_io::set_number(L, "before", r.before);
  lua_io::set_number(L, "after", r.after);
  lua_io::set_number(L, "moves", r.moves);
  lua_io::set_number(L, "evaluations", double(r.evaluations));
  return 2;
}

// sal.placement_imbalance(nodes, loads) -> the busiest node's work over the mean (1: even)
int l_placement_imbalance(lua_State* L) {
  const char* fn = "sal.placement_imbalance";
  lua::Meter args = arg_meter(L, fn);
  auto nodes = value_or_raise(L, lua_io::read_uints2(L, args, 1, "placement", 1, UINT32_MAX, 1), fn);
  lua_pushnumber(L, value_or_raise(L, algo::placement_imbalance(to_layer(nodes), numbers_arg(L, 2, fn)), fn));
  return 1;
}

// sal.moves(current, placement) -> total, most: the replicas workers holding `current` fetch to
// take `placement` (both [layer][node] of 1-based expert ids, one shape), its positions mapped onto
// them by the driver's greedy remap — what the re-plan moves, and the most one worker fetches.
int l_moves(lua_State* L) {
  const char* fn = "sal.moves";
  lua::Meter args = arg_meter(L, fn);
  auto held = value_or_raise(L, lua_io::read_uints3(L, args, 1, "current", 1, UINT32_MAX, 1), fn);
  auto next = value_or_raise(L, lua_io::read_uints3(L, args, 2, "placement", 1, UINT32_MAX, 1), fn);
  const plan::Fetched f = value_or_raise(L, plan::replicas_fetched(held, next), fn);
  lua_pushnumber(L, double(f.total));
  lua_pushnumber(L, double(f.most));
  return 2;
}

// sal.placement_search(nodes [, {floor, ignore = {ids}, evaluations, seed}]) -> nodes, info
// One layer (1-based expert ids per node, at most 16 nodes), improved by the bounded search of
// placement_search.h; info = {valid, improved, start, evaluations, killed = {k = 0..N}}.
int l_placement_search(lua_State* L) {
  const char* fn = "sal.placement_search";
  lua::Meter args = arg_meter(L, fn);
  auto nodes = value_or_raise(L, lua_io::read_uints2(L, args, 1, "placement", 1, UINT32_MAX, 1), fn);
  algo::PlacementSearchOptions o;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (auto keys = lua_io::only_keys(L, 2, {"floor", "ignore", "evaluations", "seed"}, "options"); !keys)
      luaL_error(L, "%s: %s", fn, keys.error().message().c_str());
    o.floor = int(value_or_raise(L, lua_io::read_field_number(L, 2, "floor", "options", 1), fn));
    o.max_evaluations = uint64_t(value_or_raise(L, lua_io::read_field_number(L, 2, "evaluations", "options", 0), fn));
    o.seed = uint64_t(value_or_raise(L, lua_io::read_field_number(L, 2, "seed", "options", 1), fn));
    int f = lua_io::field(L, 2, "ignore");
    if (!lua_isnil(L, f)) {
      lua::Meter args = arg_meter(L, fn);
      for (uint32_t e : value_or_raise(L, lua_io::read_uints(L, args, f, "ignore", 1, UINT32_MAX, 1), fn)) {
        if (o.ignore.size() <= e) o.ignore.resize(size_t(e) + 1, false);
        o.ignore[e] = true;
      }
    }
    lua_pop(L, 1);
  }
  algo::LayerPlacement layer = to_layer(nodes);
  auto r = value_or_raise(L, algo::search_placement(layer, o), fn);
  push_layer(L, r.layer);
  lua_newtable(L);
  lua_pushboolean(L, r.valid);
  lua_setfield(L, -2, "valid");
  lua_pushboolean(L, r.improved);
  lua_setfield(L, -2, "improved");
  lua_io::set_string(L, "start", r.start);
  lua_io::set_number(L, "evaluations", double(r.evaluations));
  lua_io::push_numbers(L, std::vector<double>(r.killed.begin(), r.killed.end()));
  lua_setfield(L, -2, "killed");
  return 2;
}

// Every sal.* function through this (upvalue 1: the function): a loop that stopped at the call's
// deadline (core/deadline.h) returned early, so its answer is dropped for the budget's error.
int within_budget(lua_State* L) {
  int n = lua_tocfunction(L, lua_upvalueindex(1))(L);
  if (!lua::budget_poll(L)) return lua::budget_raise(L);
  return n;
}

}  // namespace

void install_library(lua::Sandbox& sb) {
  lua_State* L = sb.L();
  lua_newtable(L);
  const std::pair<const char*, lua_CFunction> fns[] = {
      {"effective_floor", l_effective_floor}, {"argsort", l_argsort},
      {"recovery", l_recovery},               {"recovery_curve", l_recovery_curve},
      {"matching", l_matching},               {"min_cost_flow", l_min_cost_flow},
      {"golomb", l_golomb},                   {"spare_layout", l_spare_layout},
      {"spare_reorder", l_spare_reorder},     {"spare_mu", l_spare_mu},
      {"spare_r_star", l_spare_r_star},       {"spare_min_depth", l_spare_min_depth},
      {"moetion_window", l_moetion_window},   {"moetion_reorder", l_moetion_reorder},
      {"placement_search", l_placement_search}, {"balance_placement", l_balance_placement},
      {"placement_imbalance", l_placement_imbalance}, {"frontier", l_frontier}, {"moves", l_moves},
  };
  for (auto [name, fn] : fns) {
    lua_pushcfunction(L, fn);
    lua_pushcclosure(L, within_budget, 1);
    lua_setfield(L, -2, name);
  }
  lua::Sandbox::make_readonly(L, "sal");
  sb.set_global("sal");
}

}  // namespace sal::policy
