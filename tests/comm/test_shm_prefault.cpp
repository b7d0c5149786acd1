// test_shm_prefault.cpp — the shared-memory queues mapped in bulk (shm_prefault.h), on files of the
// test's own in /dev/shm: a shared mapping whose name has the prefix is mapped by one call, so
// touching its pages afterwards takes no page faults, in this mapping and in a second one of the
// same file (a peer's view); a mapping of another name, and a private one, are left alone; a
// mapping already prefaulted is not done again, and one that appears later is done when it does.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>

#include "comm/shm_prefault.h"

using namespace sal;

namespace prefault_test {  // named: the test programs build as one unit

constexpr size_t kBytes = 1 << 20;  // 256 pages

// This thread's minor page faults so far.
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// A file of kBytes in /dev/shm named `name`, mapped shared (twice where asked: `b`), unlinked at
// once as UCX does; unmapped when it goes.
struct Segment {
  char* a = nullptr;
  char* b = nullptr;
  Segment(const std::string& name, bool twice) {
    const std::string path = "/dev/shm/" + name;
    int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    ::unlink(path.c_str());
    REQUIRE(::ftruncate(fd, kBytes) == 0);
    a = static_cast<char*>(::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (twice) b = static_cast<char*>(::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::close(fd);
    REQUIRE(a != MAP_FAILED);
    REQUIRE(b != MAP_FAILED);
  }
  ~Segment() {
    ::munmap(a, kBytes);
    if (b) ::munmap(b, kBytes);
  }
};

// Faults taken writing a byte in every page of `p`.
long faults_touching(char* p) {
  const long f0 = minor_faults();
  for (size_t i = 0; i < kBytes; i += 4096) p[i] = 1;
  return minor_faults() - f0;
}

TEST_CASE("shared-memory queues mapped in bulk: no fault a page afterwards, other mappings untouched") {
  const std::string prefix = "sal_prefault_test_" + std::to_string(::getpid()) + "_";
  Segment queue(prefix + "queue", true);
  Segment other("sal_prefault_other_" + std::to_string(::getpid()), false);
  const comm::Prefaulted got = comm::prefault_segments(prefix);
  if (!got.supported) {  // a kernel before 5.14: nothing done, nothing failed, the pages fault as before
    MESSAGE("this kernel has no MADV_POPULATE_WRITE: the pages still fault one by one");
    CHECK(got.mappings == 0);
    CHECK(faults_touching(queue.a) >= 200);
    return;
  }
  CHECK(got.mappings == 2);  // both mappings of the queue's file
  CHECK(got.bytes == 2 * kBytes);
  CHECK(faults_touching(queue.a) < 8);
  CHECK(faults_touching(queue.b) < 8);
  CHECK(faults_touching(other.a) >= 200);  // another name: left to fault page by page
  // done once: a second call finds nothing new
  CHECK(comm::prefault_segments(prefix).mappings == 0);
  // a new segment (the same range may come back once the old is unmapped) is done when it appears
  Segment later(prefix + "later", false);
  const comm::Prefaulted again = comm::prefault_segments(prefix);
  CHECK(again.mappings == 1);
  CHECK(faults_touching(later.a) < 8);
}

TEST_CASE("shared-memory prefaulting skips private mappings and takes no other prefix's") {
  const std::string prefix = "sal_prefault_private_" + std::to_string(::getpid()) + "_";
  const std::string path = "/dev/shm/" + prefix + "x";
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  ::unlink(path.c_str());
  REQUIRE(::ftruncate(fd, kBytes) == 0);
  char* p = static_cast<char*>(::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
  ::close(fd);
  REQUIRE(p != MAP_FAILED);
  CHECK(comm::prefault_segments(prefix).mappings == 0);  // copy-on-write, not a queue a peer writes
  CHECK(comm::prefault_segments("sal_prefault_no_such_prefix_").mappings == 0);
  ::munmap(p, kBytes);
}

}  // namespace prefault_test
