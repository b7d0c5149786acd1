// shm_sweep.h — removes the shared-memory segments that killed workers leave behind.
//
// The same-host data plane (shm_plane.h) runs over UCX's posix transport, whose segments are files
// in /dev/shm named ucx_shm_posix_<id>. UCX creates each one, maps it and unlinks it at once (peers
// attach through /proc/<pid>/fd/<fd>), so a file of that name lives for microseconds — unless the
// process is SIGKILLed inside that window. Drills kill hundreds of workers, the OOM killer kills
// some in production: about one kill in fifty left a segment of 0.2–4 MB here, never reclaimed
// (398 MB after a few days of drills on the development machine).
//
// A segment is removed only when all of these hold: its name is UCX's, this user owns it, it was
// last modified longer ago than `min_age` (10 s: UCX's window is a create, a resize and a map; a
// live process's file never gets that old), and no process this user can see has it open or mapped
// (every /proc/<pid>/fd and /proc/<pid>/maps is read). The agents sweep when they start and after a
// worker of theirs dies by a signal; `salamander run` sweeps when its local mesh is down.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/result.h"

namespace sal::comm {

struct ShmSweep {
  size_t removed = 0;   // files removed
  uint64_t bytes = 0;   // their sizes
  size_t in_use = 0;    // stale-looking files some process still holds (kept)
};

constexpr const char* kUcxSegmentPrefix = "ucx_shm_posix_";

// Sweeps `dir` (/dev/shm in production; tests pass a directory of their own).
Result<ShmSweep> sweep_ucx_segments(const std::string& dir = "/dev/shm",
                                    std::chrono::seconds min_age = std::chrono::seconds(10));

// Sweeps /dev/shm and logs what it removed (a warning only when the sweep itself failed).
void sweep_ucx_segments_logged();

}  // namespace sal::comm
