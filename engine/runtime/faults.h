// faults.h — drill fault injection in the worker. A drill arms a fault (wire::FaultArm: a point in
// the step and a step number); when the training thread reaches that point in that step, the
// worker dies as a node dies: it SIGKILLs its agent (its parent) and then itself, with no goodbye
// and nothing flushed but one log line. The survivors see exactly what a real crash does to them:
// a dropped connection and collectives that never complete.
//
// A corruption (FaultPoint::corrupt, a drill's corrupt{}) kills nothing: it is kept apart from the
// armed death, and the Trainer takes it as the step it names begins, flipping bits of one unit
// (flip_bits) before the step's digests are taken — as a bad bit of memory would between steps.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "wire/messages.h"

namespace sal::runtime {

class FaultInjector {
 public:
  // Thread-safe; a later arm replaces an earlier one (a corruption replaces only a corruption).
  void arm(const wire::FaultArm& f);
  // Called by the training thread at each point; does not return when an armed fault matches.
  void at(wire::FaultPoint point, uint64_t step);
  // The corruption armed for `step` (or for any step), taken: it happens once.
  std::optional<wire::FaultArm> take_corruption(uint64_t step);

 private:
  std::mutex mu_;
  std::optional<wire::FaultArm> armed_;
  std::optional<wire::FaultArm> corruption_;
};

// Flips `bits` distinct bits of `w`, chosen deterministically from `seed`: mantissa bits only (the
// low 23 of each float), so the step that runs on the corrupted unit before the digests stop it
// computes on finite numbers. Returns how many it flipped (fewer only when `w` has fewer bits).
uint32_t flip_bits(std::vector<float>& w, uint32_t bits, uint64_t seed);

const char* fault_point_name(wire::FaultPoint p);

// SIGKILLs the parent (the agent) and this process.
[[noreturn]] void die_as_node(const std::string& why);

}  // namespace sal::runtime
