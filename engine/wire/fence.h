// fence.h — the StepAbort an agent sends its workers when it is cut off from the controller (it
// has heard nothing for as long as the controller waits out a silence of every node:
// mesh/membership.h, fence_after_ms). Its epoch is kFenceEpoch, which no controller sends
// (the controller's epochs start at 1): what is in flight is abandoned and the workers step no
// more, but a step already computed and voted keeps its gradients, since a controller restarted
// from its journal may still commit it (docs/operations.md, "When the controller dies").
#pragma once

#include <cstdint>

namespace sal::wire {

constexpr uint64_t kFenceEpoch = 0;

}  // namespace sal::wire
