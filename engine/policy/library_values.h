// library_values.h — what the sal.* bindings (library.cpp, library_frontier.cpp) share: raising a
// C++ error as the function's Lua error (or as the budget's, when a loop stopped at the call's
// deadline), the meter their table arguments are read under, and one layer's placement between Lua's 1-based expert ids per node and the
// algorithm library's LayerPlacement.
#pragma once

#include <lua.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "lua/meter.h"
#include "lua/sandbox.h"
#include "policy/algo/recovery.h"
#include "policy/lua_io.h"

namespace sal::policy {

template <class T>
T value_or_raise(lua_State* L, Result<T> r, const char* fn) {
  if (!r && !lua::budget_poll(L)) lua::budget_raise(L);  // it stopped at the call's deadline
  if (!r) luaL_error(L, "%s: %s", fn, r.error().message().c_str());
  return std::move(*r);
}

// What reading a function's table arguments may cost (lua_io::read_limits).
inline lua::Meter arg_meter(lua_State* L, const char* fn) {
  return lua::Meter(L, lua_io::read_limits(L, std::string(fn) + "'s arguments"));
}

// A layer from 0-based expert ids per node (Lua's 1-based ids already converted); push_layer is
// the way back.
inline algo::LayerPlacement to_layer(const std::vector<std::vector<uint32_t>>& nodes) {
  algo::LayerPlacement layer;
  uint32_t experts = 0;
  for (const auto& node : nodes) {
    layer.nodes.emplace_back(node.begin(), node.end());
    for (uint32_t e : node) experts = std::max(experts, e + 1);
  }
  layer.experts = int(experts);
  return layer;
}

inline void push_layer(lua_State* L, const algo::LayerPlacement& layer) {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& node : layer.nodes) out.emplace_back(node.begin(), node.end());
  lua_io::push_uints2(L, out, 1);
}

// sal.frontier (library_frontier.cpp).
int l_frontier(lua_State* L);

}  // namespace sal::policy
