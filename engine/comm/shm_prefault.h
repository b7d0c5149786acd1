// shm_prefault.h — maps the pages of the same-host data plane's shared memory in bulk, so that its
// first steps do not take a page fault per page.
//
// A shared-memory plane (shm_plane.h) maps its own receive queue and, through UCX's posix
// transport, every peer's: about 4 MB a queue with its message descriptors, files
// /dev/shm/ucx_shm_posix_<id> mapped shared and unlinked at once. Left alone, each page of them is
// mapped into this process on first touch, one minor fault per page and per process, in the middle of the steps that first send through
// it; a queue's pages are reached only as its ring wraps, so the faults spread over a plan's first
// steps, and every other rank waits for the one taking them. On a virtual machine a fault costs
// 10–14 µs; madvise(MADV_POPULATE_WRITE) maps a whole range in one call at 1.3 µs a page where the
// page is new, 0.4 µs where a peer already made it, and leaves the contents as they are
// (docs/performance.md has what it saves).
//
// prefault_segments() does that for every shared, writable mapping of this process whose file
// name starts with `prefix` and that it has not prefaulted yet. The plane calls it once its
// endpoints are wired up (the peers' queues are mapped by then), after each of its first four
// calls (UCX maps a peer's message descriptors only when this rank first writes into one), and
// when it prepares the next epoch's worker in the background (its own queue and descriptors).
// Kernels before 5.14 lack the call: nothing is prefaulted and nothing fails. A mapping gone in
// the meantime (a retired worker destroyed on another thread) is skipped.
#pragma once

#include <cstdint>
#include <string>

namespace sal::comm {

struct Prefaulted {
  size_t mappings = 0;  // mappings prefaulted by this call
  uint64_t bytes = 0;   // their length
  bool supported = true;  // false where the kernel has no MADV_POPULATE_WRITE
};

// Thread-safe; what was prefaulted once is not again (it is remembered until it is unmapped).
Prefaulted prefault_segments(const std::string& prefix);

}  // namespace sal::comm
