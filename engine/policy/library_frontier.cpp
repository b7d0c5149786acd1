// library_frontier.cpp — sal.frontier, the placement frontier (algo/frontier.h) as policies see it:
//
//   sal.frontier(replicas, loads, nodes, slots [, options]) -> { points = {...}, bound = {...}, invalid }
//
// replicas and loads are per layer, as ctx.replicas and ctx.loads. options: floor (default 1),
// failures (K: P(1..K), default 3), evaluations (the balancer's, per layer and candidate),
// only = {"blocks-2", ...} (build only these constructions; default every one; {} none),
// include = { {name = "mro", placement = <per layer, per node, 1-based expert ids>}, ... } (weighed
// as given), placements = "frontier" (default: only points on the frontier carry their placement —
// a 1024-node plan's every candidate would not fit a policy's memory), "all" or "none",
// steps = ctx.steps (the window's recorded steps, {{{tokens of expert e} per layer} per step}: the
// points are then judged on each step's own split, algo/step_balance.h) and split = "counts" (the
// default) or "even" (how the dispatcher splits a step: ctx.dispatch).
// Each point: { name, frontier, beaten_by, balance (mean over the layers), median (the median
// layer's), balances = {per layer}, load_balance (on the loads, the mean over the layers; the same
// as balance without steps), p = {P(1), ..., P(K)}, placement }, by balance.
#include <optional>
#include <string>
#include <vector>

#include "policy/algo/frontier.h"
#include "policy/algo/step_balance.h"
#include "policy/library_values.h"

namespace sal::policy {
namespace {

constexpr const char* kFn = "sal.frontier";
constexpr uint32_t kMost = 1u << 24;  // the largest count or id read (as the kinds' readers)
constexpr uint32_t kMostTokens = 0xFFFFFFFFu;  // a step's tokens of one expert

// options.steps, [step][layer][expert], as the frontier takes them: [layer][step][expert].
algo::StepsByLayer steps_arg(lua_State* L, int idx, size_t layers) {
  if (lua_isnil(L, idx)) return {};
  lua::Meter args = arg_meter(L, kFn);
  auto steps = value_or_raise(L, lua_io::read_uints3(L, args, idx, "options.steps", 0, kMostTokens), kFn);
  auto by_layer = algo::steps_by_layer(steps, layers);
  if (!by_layer) luaL_error(L, "%s: options.steps: %s (the replicas')", kFn, by_layer.error().message().c_str());
  return std::move(*by_layer);
}

bool split_arg(lua_State* L, int idx) {
  if (lua_isnil(L, idx)) return true;
  const std::string v = lua_isstring(L, idx) ? lua_tostring(L, idx) : "";
  if (v != "counts" && v != "even") luaL_error(L, "%s: options.split must be \"counts\" or \"even\"", kFn);
  return v == "counts";
}

std::vector<algo::LayerDemand> demand_args(lua_State* L, int& experts) {
  lua::Meter args = arg_meter(L, kFn);
  auto replicas = value_or_raise(L, lua_io::read_uints2(L, args, 1, "replicas", 0, kMost), kFn);
  auto loads = value_or_raise(L, lua_io::read_numbers2(L, args, 2, "loads"), kFn);
  if (replicas.size() != loads.size())
    luaL_error(L, "%s: %d layers of replicas but %d of loads", kFn, int(replicas.size()), int(loads.size()));
  std::vector<algo::LayerDemand> out;
  experts = 0;
  for (size_t l = 0; l < replicas.size(); ++l) {
    out.push_back({std::vector<int>(replicas[l].begin(), replicas[l].end()), loads[l]});
    experts = std::max(experts, int(replicas[l].size()));
  }
  return out;
}

std::vector<algo::FrontierCandidate> include_arg(lua_State* L, int idx, int experts) {
  std::vector<algo::FrontierCandidate> out;
  if (lua_isnil(L, idx)) return out;
  const int n = lua_io::sequence_length(L, idx);
  if (n < 0) luaL_error(L, "%s: options.include must be a list of {name = ..., placement = ...}", kFn);
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);
    const int item = lua_gettop(L);
    const std::string where = "options.include[" + std::to_string(i) + "]";
    if (!lua_istable(L, item)) luaL_error(L, "%s: %s must be a table {name = ..., placement = ...}", kFn, where.c_str());
    lua_getfield(L, item, "name");
    if (!lua_isstring(L, -1)) luaL_error(L, "%s: %s.name must be a string", kFn, where.c_str());
    algo::FrontierCandidate c;
    c.name = lua_tostring(L, -1);
    const int placement = lua_io::field(L, item, "placement");
    lua::Meter args = arg_meter(L, kFn);
    auto layers = value_or_raise(
        L, lua_io::read_uints3(L, args, placement, where + ".placement", 1, uint32_t(std::max(experts, 1)), 1), kFn);
    for (const auto& layer : layers) {
      c.layers.push_back(to_layer(layer));
      c.layers.back().experts = experts;
    }
    out.push_back(std::move(c));
    lua_settop(L, item - 1);
  }
  return out;
}

std::optional<std::vector<std::string>> names_arg(lua_State* L, int idx) {
  if (lua_isnil(L, idx)) return std::nullopt;
  std::vector<std::string> out;
  const int n = lua_io::sequence_length(L, idx);
  if (n < 0) luaL_error(L, "%s: options.only must be a list of construction names", kFn);
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, i);
    if (!lua_isstring(L, -1)) luaL_error(L, "%s: options.only[%d] must be a string", kFn, i);
    out.push_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return out;
}

struct Shown {
  bool frontier = true, all = false;
};

Shown placements_arg(lua_State* L, int idx) {
  if (lua_isnil(L, idx)) return {};
  const std::string v = lua_isstring(L, idx) ? lua_tostring(L, idx) : "";
  if (v == "frontier") return {};
  if (v == "all") return {true, true};
  if (v == "none") return {false, false};
  luaL_error(L, "%s: options.placements must be \"frontier\", \"all\" or \"none\"", kFn);
  return {};
}

void push_point(lua_State* L, const algo::FrontierPoint& p, bool with_placement) {
  lua_newtable(L);
  lua_io::set_string(L, "name", p.name);
  lua_pushboolean(L, p.on_frontier);
  lua_setfield(L, -2, "frontier");
  if (!p.beaten_by.empty()) lua_io::set_string(L, "beaten_by", p.beaten_by);
  lua_io::set_number(L, "balance", p.mean_balance);
  lua_io::set_number(L, "load_balance", p.mean_load_balance);
  lua_io::set_number(L, "median", algo::median_balance(p));
  lua_io::push_numbers(L, p.balance);
  lua_setfield(L, -2, "balances");
  lua_io::push_numbers(L, p.p);
  lua_setfield(L, -2, "p");
  if (!with_placement) return;
  lua_createtable(L, int(p.layers.size()), 0);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    push_layer(L, p.layers[l]);
    lua_rawseti(L, -2, int(l + 1));
  }
  lua_setfield(L, -2, "placement");
}

}  // namespace

int l_frontier(lua_State* L) {
  int experts = 0;
  const auto demand = demand_args(L, experts);
  algo::FrontierOptions o;
  o.nodes = int(luaL_checkinteger(L, 3));
  o.slots = int(luaL_checkinteger(L, 4));
  std::vector<algo::FrontierCandidate> include;
  Shown shown;
  if (!lua_isnoneornil(L, 5)) {
    luaL_checktype(L, 5, LUA_TTABLE);
    if (auto keys = lua_io::only_keys(L, 5, {"floor", "failures", "evaluations", "include", "placements", "only", "steps", "split"},
                                      "options");
        !keys)
      luaL_error(L, "%s: %s", kFn, keys.error().message().c_str());
    o.floor = int(value_or_raise(L, lua_io::read_field_number(L, 5, "floor", "options", 1), kFn));
    o.max_failures = int(value_or_raise(L, lua_io::read_field_number(L, 5, "failures", "options", 3), kFn));
    o.balance_evaluations = uint64_t(value_or_raise(L, lua_io::read_field_number(L, 5, "evaluations", "options", 0), kFn));
    include = include_arg(L, lua_io::field(L, 5, "include"), experts);
    lua_pop(L, 1);
    shown = placements_arg(L, lua_io::field(L, 5, "placements"));
    lua_pop(L, 1);
    o.only = names_arg(L, lua_io::field(L, 5, "only"));
    lua_pop(L, 1);
    o.steps = steps_arg(L, lua_io::field(L, 5, "steps"), demand.size());
    lua_pop(L, 1);
    o.split_by_counts = split_arg(L, lua_io::field(L, 5, "split"));
    lua_pop(L, 1);
  }
  if (o.nodes < 1 || o.slots < 1) return luaL_error(L, "%s: nodes and slots must be at least 1", kFn);
  const auto f = value_or_raise(L, algo::placement_frontier(demand, o, include), kFn);
  lua_newtable(L);
  lua_createtable(L, int(f.points.size()), 0);
  for (size_t i = 0; i < f.points.size(); ++i) {
    push_point(L, f.points[i], shown.all || (shown.frontier && f.points[i].on_frontier));
    lua_rawseti(L, -2, int(i + 1));
  }
  lua_setfield(L, -2, "points");
  lua_io::push_numbers(L, f.bound);
  lua_setfield(L, -2, "bound");
  lua_io::set_number(L, "invalid", f.invalid);
  return 1;
}

}  // namespace sal::policy
