// heap.cpp — see heap.h.
#include "core/heap.h"

#include <malloc.h>

namespace sal {

namespace {
// glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX); a larger one is refused.
constexpr int kMmapThreshold = 32 << 20;
// Free memory at the heap's top beyond this goes back to the kernel (glibc: 128 KiB, raised as
// mapped blocks are freed); the threads' own heaps are trimmed by the same rule.
constexpr int kTrimThreshold = 512 << 20;
}  // namespace

void keep_large_blocks() {
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
}

}  // namespace sal
