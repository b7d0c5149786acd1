// heap.h — how the processes that move large buffers (agents, workers) ask glibc's allocator to
// keep them. By default a block of 128 KiB or more is mapped for itself and unmapped when freed,
// and the heap's free top is handed back to the kernel: every slot an agent receives (ZeroMQ's
// message, then the decoded unit copies) was then fresh memory, each page faulted in and zeroed,
// and every free unmapped it again with a TLB flush on every core. On a virtual machine those
// faults and flushes cost the agents more CPU than the copies themselves (docs/checkpoints.md).
#pragma once

#include <cstddef>

namespace sal {

// Free memory at the heap's top beyond this goes back to the kernel (glibc: 128 KiB by default):
// what a process keeps of the heap it has freed.
constexpr size_t kKeptHeapBytes = size_t(512) << 20;

// Blocks up to glibc's largest threshold (32 MiB) come from the heap and go back to it, and freed
// memory stays in the process for the next block of that size. The process's peak memory stays
// mapped; what it holds at its peak is what it needs again.
void keep_large_blocks();

}  // namespace sal
