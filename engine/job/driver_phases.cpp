// driver_phases.cpp — see driver_phases.h.
#include "job/driver_phases.h"

namespace sal::job {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::gathering: return "gathering";
    case Phase::planning: return "planning";
    case Phase::running: return "running";
    case Phase::saving: return "saving";
    case Phase::done: return "done";
    case Phase::failed: return "failed";
  }
  return "?";
}

Phase coarse_phase(size_t state_index) {
  static constexpr Phase kCoarse[] = {Phase::gathering, Phase::gathering, Phase::planning, Phase::planning, Phase::planning,
                                      Phase::running,   Phase::saving,    Phase::done,     Phase::failed};
  static_assert(std::size(kCoarse) == std::variant_size_v<State>, "a coarse phase for every phase");
  return state_index < std::size(kCoarse) ? kCoarse[state_index] : Phase::failed;
}

const char* state_name(const State& s) {
  static constexpr const char* kNames[] = {"gathering", "reconciling", "deciding", "switching", "retrying",
                                           "running",   "saving",      "done",     "failed"};
  static_assert(std::size(kNames) == std::variant_size_v<State>, "a name for every phase");
  return kNames[s.index()];
}

}  // namespace sal::job
