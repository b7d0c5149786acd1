// heap.h — how the processes that move large buffers (agents, workers) ask glibc's allocator to
// keep them. By default a block of 128 KiB or more is mapped for itself and unmapped when freed,
// and the heap's free top is handed back to the kernel: every slot an agent receives (ZeroMQ's
// message, then the decoded unit copies) was then fresh memory, each page faulted in and zeroed,
// and every free unmapped it again with a TLB flush on every core. On a virtual machine those
// faults and flushes cost the agents more CPU than the copies themselves (docs/checkpoints.md).
// And the heap they grow is faulted in 2 MiB at a time, on transparent huge pages, where the kernel
// allows them: a process is started with glibc's tunables for that (huge_page_tunables), because
// glibc reads them only as a process starts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sal {

// Free memory at the heap's top beyond this goes back to the kernel (glibc: 128 KiB by default):
// what a process keeps of the heap it has freed.
constexpr size_t kKeptHeapBytes = size_t(512) << 20;

// Blocks up to glibc's largest threshold (32 MiB) come from the heap and go back to it, and freed
// memory stays in the process for the next block of that size. The process's peak memory stays
// mapped; what it holds at its peak is what it needs again.
void keep_large_blocks();

// The environment variable that carries glibc's tunables to a process as it starts.
constexpr const char* kTunablesVariable = "GLIBC_TUNABLES";

// The GLIBC_TUNABLES value for a process whose main heap grows on transparent huge pages:
// `existing` (the value this process was given, possibly empty) with glibc.malloc.hugetlb=1 (glibc
// advises the kernel to back what its main heap grows by with huge pages; the heaps of threads'
// own arenas it does not advise) added where `existing` does not set it: an operator's
// glibc.malloc.hugetlb=0 turns it off. On a virtual machine a page's first touch costs a fault of
// about 12 us, so each MiB a heap grows by costs 3 ms of CPU; on huge pages 0.3 ms
// (docs/performance.md, "The heap on huge pages"). Where the kernel gives no huge pages
// (/sys/kernel/mm/transparent_hugepage/enabled: never) the advice changes nothing.
std::string huge_page_tunables(std::string_view existing);

}  // namespace sal
