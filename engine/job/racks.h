// racks.h — the job file's racks (mesh.racks): which nodes share a rack, a failure domain above the
// host (a rack's switch or power feed takes all its hosts at once). Written as
//   mesh.racks = "a: gpu-01 gpu-02; b: gpu-03 gpu-04"
// — rack names (letters, digits, '_', '-', '.'), each followed by the names its nodes register with
// (an agent's --name; `salamander run` names its local agents node0, node1, ...). A node named in no
// rack is a rack of its own. The plans spread replicas over racks before hosts (plan/domains.h).
#pragma once

#include <map>
#include <string>

#include "core/result.h"

namespace sal::job {

// node name -> rack name; an empty text names no racks. Errors say which part breaks which rule.
Result<std::map<std::string, std::string>> parse_racks(const std::string& text);

}  // namespace sal::job
