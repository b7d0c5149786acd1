// test_heap.cpp — core/heap.h: once a process keeps large blocks, a block of megabytes comes from
// the heap (not a mapping of its own, faulted in afresh each time) and goes back to it when freed.
#include <doctest/doctest.h>

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "core/heap.h"

TEST_CASE("after keep_large_blocks a 16 MiB block is the heap's, and freeing it keeps the memory for the next") {
  sal::keep_large_blocks();
  constexpr size_t kBlock = 16u << 20;
  const size_t mapped_before = mallinfo2().hblks;
  void* a = std::malloc(kBlock);
  REQUIRE(a != nullptr);
  std::memset(a, 1, kBlock);
  CHECK(mallinfo2().hblks == mapped_before);  // glibc's default maps a block this big for itself
  std::free(a);
  CHECK(mallinfo2().fordblks >= kBlock);  // kept in the heap, free for the next block
  void* b = std::malloc(kBlock);
  REQUIRE(b != nullptr);
  CHECK(mallinfo2().hblks == mapped_before);
  std::free(b);
}
