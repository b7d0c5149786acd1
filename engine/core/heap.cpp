// heap.cpp — see heap.h.
#include "core/heap.h"

#include <malloc.h>

namespace sal {

namespace {
// glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX); a larger one is refused.
constexpr int kMmapThreshold = 32 << 20;
// The threads' own heaps are trimmed by the same rule as the main one (kKeptHeapBytes).
constexpr int kTrimThreshold = int(kKeptHeapBytes);
}  // namespace

void keep_large_blocks() {
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
}

}  // namespace sal
