// faults.h — drill fault injection in the worker. A drill arms a fault (wire::FaultArm: a point in
// the step and a step number); when the training thread reaches that point in that step, the
// worker dies as a node dies: it SIGKILLs its agent (its parent) and then itself, with no goodbye
// and nothing flushed but one log line. The survivors see exactly what a real crash does to them:
// a dropped connection and collectives that never complete.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "wire/messages.h"

namespace sal::runtime {

class FaultInjector {
 public:
  // Thread-safe; a later arm replaces an earlier one.
  void arm(const wire::FaultArm& f);
  // Called by the training thread at each point; does not return when an armed fault matches.
  void at(wire::FaultPoint point, uint64_t step);

 private:
  std::mutex mu_;
  std::optional<wire::FaultArm> armed_;
};

const char* fault_point_name(wire::FaultPoint p);

// SIGKILLs the parent (the agent) and this process.
[[noreturn]] void die_as_node(const std::string& why);

}  // namespace sal::runtime
