// timed.h — a data plane that clocks itself: wraps a Collectives and adds the time each call
// takes (wall and CPU) to a WaitClock. On a CPU data plane a collective's time is the wait for the slowest peer
// plus the transfer, so a worker's step time minus its clock is what it computed itself: a slow
// worker computes long and waits little, its peers the other way round (the health measurements,
// job/health.h). Every call is forwarded unchanged; abort() and the op timeout are the inner
// object's. (A GPU plane's calls return before the device is done: their times say nothing.)
#pragma once

#include <cstdint>
#include <memory>

#include "comm/collectives.h"

namespace sal::comm {

// Time spent inside the collectives of the planes that share it: wall, the calling thread's CPU
// and the whole process's CPU (nanoseconds). Written and read by the thread that calls them.
struct WaitClock {
  int64_t ns = 0, thread_cpu_ns = 0, process_cpu_ns = 0;
};

// CPU time so far, in nanoseconds: this thread's, and every thread's of this process.
int64_t thread_cpu_ns();
int64_t process_cpu_ns();
// The page faults this thread has taken so far (minor and major): a step whose buffers grow past
// what the heap held before faults its new pages in, each one a trap (core/heap.h).
int64_t thread_page_faults();

std::unique_ptr<Collectives> timed(std::unique_ptr<Collectives> inner, std::shared_ptr<WaitClock> clock);

}  // namespace sal::comm
