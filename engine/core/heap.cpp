// heap.cpp — see heap.h.
#include "core/heap.h"

#include <malloc.h>

#include <array>
#include <utility>

namespace sal {

namespace {
// glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX); a larger one is refused.
constexpr int kMmapThreshold = 32 << 20;
// The threads' own heaps are trimmed by the same rule as the main one (kKeptHeapBytes).
constexpr int kTrimThreshold = int(kKeptHeapBytes);
// What huge_page_tunables adds: each tunable with the value it gets.
// (Not glibc.malloc.arena_max=1, which would put a worker's compute threads on the main heap too:
// one arena's lock then ties every thread's allocations to the others', and under a CPU hog a
// worker was killed as unresponsive in one of three CI runs of t0150.)
constexpr std::array<std::pair<std::string_view, std::string_view>, 1> kHugePageTunables{{
    {"glibc.malloc.hugetlb", "1"},
}};

// Whether a colon-separated list of name=value tunables sets `name`.
bool sets_tunable(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const size_t colon = list.find(':');
    const std::string_view item = list.substr(0, colon);
    if (item.substr(0, item.find('=')) == name) return true;
    if (colon == std::string_view::npos) break;
    list.remove_prefix(colon + 1);
  }
  return false;
}
}  // namespace

void keep_large_blocks() {
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
}

std::string huge_page_tunables(std::string_view existing) {
  std::string out(existing);
  for (const auto& [name, value] : kHugePageTunables) {
    if (sets_tunable(existing, name)) continue;
    if (!out.empty()) out += ':';
    out.append(name).append("=").append(value);
  }
  return out;
}

}  // namespace sal
