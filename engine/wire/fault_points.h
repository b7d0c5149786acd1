// fault_points.h — the points of a step where a drill's fault fires (wire::FaultPoint), each with
// the name drills and the workers' logs use and the words a drill's description says: one table
// for the worker's injector (runtime/faults.h), the drill reader's `during` and Action::describe().
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "wire/message_types.h"

namespace sal::wire {

struct FaultPointName {
  FaultPoint point;
  std::string_view name;    // kill{during = NAME}, the workers' log lines
  std::string_view phrase;  // "kill node 2 after step 10 during the PHRASE"
  bool during;              // a kill's `during` may name it (a corruption is its own action)
};

// In FaultPoint's order (checked below).
inline constexpr std::array<FaultPointName, size_t(FaultPoint::count_)> kFaultPointNames{{
    {FaultPoint::forward, "forward", "forward", true},
    {FaultPoint::alltoall, "alltoall", "all-to-all", true},
    {FaultPoint::allreduce, "allreduce", "gradient all-reduce", true},
    {FaultPoint::migration, "migration", "state migration", true},
    {FaultPoint::snapshot, "snapshot", "snapshot", true},
    {FaultPoint::backward, "backward", "backward pass", true},
    {FaultPoint::corrupt, "corrupt", "corruption", false},
    {FaultPoint::validation, "validation", "validation", true},
}};

constexpr bool fault_points_in_order() {
  for (size_t i = 0; i < kFaultPointNames.size(); ++i)
    if (size_t(kFaultPointNames[i].point) != i) return false;
  return true;
}
static_assert(fault_points_in_order(), "kFaultPointNames lists every FaultPoint in the enum's order");

inline constexpr FaultPointName kNoFaultPoint{FaultPoint::count_, "?", "?", false};

// The entry of a point (kNoFaultPoint, "?", for none past the table).
constexpr const FaultPointName& fault_point_entry(FaultPoint p) {
  return size_t(p) < kFaultPointNames.size() ? kFaultPointNames[size_t(p)] : kNoFaultPoint;
}

}  // namespace sal::wire
