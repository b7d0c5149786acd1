// test_timed.cpp — comm/timed.h's clocks of the calling thread: its page faults count the first
// touch of each fresh page it writes and not a second write to the same pages, and another
// thread's faults are not its own.
#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <thread>

#include "comm/timed.h"

namespace {

constexpr size_t kBytes = size_t(4) << 20;

// Writes one byte in each page of `p` (kBytes).
void touch(char* p) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  for (size_t i = 0; i < kBytes; i += page) p[i] = 1;
}

}  // namespace

TEST_CASE("thread_page_faults counts this thread's first touches of fresh pages, not a second write or other threads'") {
  const size_t pages = kBytes / size_t(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  (void)madvise(m, kBytes, MADV_NOHUGEPAGE);  // a fault per page, whatever the machine's huge pages
  auto* p = static_cast<char*>(m);

  const int64_t before = sal::comm::thread_page_faults();
  touch(p);
  const int64_t first = sal::comm::thread_page_faults() - before;
  CHECK(first >= int64_t(pages));
  touch(p);
  CHECK(sal::comm::thread_page_faults() - before - first < 16);  // the pages are there now

  void* other = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(other != MAP_FAILED);
  (void)madvise(other, kBytes, MADV_NOHUGEPAGE);
  const int64_t mine = sal::comm::thread_page_faults();
  std::thread([&] { touch(static_cast<char*>(other)); }).join();
  CHECK(sal::comm::thread_page_faults() - mine < 16);
  munmap(other, kBytes);
  munmap(m, kBytes);
}
