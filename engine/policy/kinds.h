// kinds.h — everything that differs between the five kinds of policy, as one table per kind:
// how its input becomes a Lua `ctx`, how a Lua proposal is read back, the C++ validator, the C++
// floor policy used when no Lua generation can decide, and how proposals are summarised and
// compared (policy.show, policy.diff). The slot machinery (slot.h) is the same for all kinds.
#pragma once

#include <lua.hpp>

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "core/result.h"
#include "lua/meter.h"
#include "policy/decision.h"

namespace sal::policy {

struct KindOps {
  // Pushes the input as a fresh ctx table (a copy: a policy may change it, nothing else sees).
  void (*push_ctx)(lua_State* L, const Input& in);
  // The inverse: a ctx table written in Lua (selftests, policy.decide from the REPL) as an Input.
  // Like a proposal, it is read raw and counted (lua_io.h).
  Result<Input> (*read_ctx)(lua_State* L, int idx, lua::Meter& m);
  // Reads the proposal at absolute index idx: raw, plain tables only, its lists counted on `m`.
  Result<Proposal> (*read)(lua_State* L, int idx, const Input& in, lua::Meter& m);
  // The C++ validators; the error names the rule broken.
  Status (*validate)(const Proposal& p, const Input& in);
  // The floor policy: always valid for a valid input.
  Proposal (*floor)(const Input& in);
  // One line a person reads ("8 experts x 2 layers, replicas 2..6, floor 2").
  std::string (*summary)(const Proposal& p);
  // What changes from `before` to `after` ("layer 0: 3 of 10 nodes change, 5 replicas move").
  std::string (*diff)(const Proposal& before, const Proposal& after);
  nlohmann::ordered_json (*to_json)(const Proposal& p);
};

const KindOps& ops_for(Kind k);

// Per-kind tables (allocation.cpp, placement.cpp, checkpoint.cpp, redundancy.cpp, health.cpp).
const KindOps& allocation_ops();
const KindOps& placement_ops();
const KindOps& checkpoint_ops();
const KindOps& redundancy_ops();
const KindOps& health_ops();

}  // namespace sal::policy
