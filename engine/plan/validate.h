// validate.h — the C++ validators every proposal passes before it is applied. A policy proposes;
// these rules decide. Each failure names the layer, the expert or node, and the rule broken — its
// ids as whoever wrote them counts: `base` 0 for plan files and the C++ side, 1 for a Lua policy's
// proposal (policy/*.cpp pass kLuaIds), so a policy's author reads the ids their code wrote.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "plan/plan.h"

namespace sal::plan {

// The floor f an allocation can honour: f itself, or lowered to floor(N·c/E) when N·c < f·E (too few
// slots for f replicas of every expert); `note` says so when lowered.
struct Floor {
  uint32_t f = 1;
  std::string note;
};
Floor effective_floor(uint32_t f, uint32_t nodes, uint32_t slots, uint32_t experts);

constexpr uint32_t kPlanIds = 0;  // ids in messages as plan files and the C++ side count them
constexpr uint32_t kLuaIds = 1;   // as a Lua policy counts them

// Allocation of one layer: one count per expert, each >= 1 and >= floor, filling exactly N·c slots.
Status check_allocation(const std::vector<uint32_t>& replicas, uint32_t experts, uint32_t nodes,
                        uint32_t slots, uint32_t floor, uint32_t base = kPlanIds);

// Placement of one layer against its allocation: N nodes of exactly c slots, known expert ids,
// each expert placed exactly replicas[e] times, and spanning at least min(floor, N) distinct nodes.
Status check_placement(const LayerPlan& layer, uint32_t experts, uint32_t nodes, uint32_t slots,
                       uint32_t floor, uint32_t base = kPlanIds);

// Every layer of a plan (allocation and placement), naming the layer on failure.
Status check_plan(const Plan& p);

}  // namespace sal::plan
