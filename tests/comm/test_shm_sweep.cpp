// test_shm_sweep.cpp — the sweep of UCX shared-memory segments left by killed workers, in a
// directory of the test's own: a stale segment nobody holds is removed; a young one, one held open
// by another process, one mapped (its fd closed), and a file of another name are kept.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "comm/shm_sweep.h"
#include "support/temp_dirs.h"

using namespace sal;
namespace fs = std::filesystem;

namespace {

// A file of `bytes` bytes, last modified `age_s` seconds ago.
std::string make_file(const std::string& dir, const std::string& name, size_t bytes, int age_s) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << std::string(bytes, 'x');
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age_s;
  times[1] = times[0];
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
  return path;
}

}  // namespace

TEST_CASE("the UCX segment sweep removes stale segments nobody holds, and keeps young, held, mapped and foreign files") {
  const std::string dir = sal::test::temp_dir("shmsweep");
  const std::string stale = make_file(dir, "ucx_shm_posix_1a2b", 4096, 100);
  const std::string young = make_file(dir, "ucx_shm_posix_young", 4096, 0);
  const std::string held = make_file(dir, "ucx_shm_posix_held", 4096, 100);
  const std::string mapped = make_file(dir, "ucx_shm_posix_mapped", 4096, 100);
  const std::string foreign = make_file(dir, "sal-shm-other", 4096, 100);

  // another process holds one open
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test, whatever fails in it
    if (getppid() == 1) _exit(1);
    int fd = open(held.c_str(), O_RDWR);
    (void)!write(ready[1], "k", 1);
    pause();
    _exit(fd >= 0 ? 0 : 1);
  }
  char k;
  REQUIRE(read(ready[0], &k, 1) == 1);
  // this process maps one and closes its fd
  int fd = open(mapped.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(m != MAP_FAILED);
  close(fd);

  auto swept = comm::sweep_ucx_segments(dir, std::chrono::seconds(10));
  REQUIRE(swept.ok());
  CHECK(swept->removed == 1);
  CHECK(swept->bytes == 4096);
  CHECK(swept->in_use == 2);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(young));
  CHECK(fs::exists(held));
  CHECK(fs::exists(mapped));
  CHECK(fs::exists(foreign));

  // once nobody holds them, the held and the mapped one go too
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  munmap(m, 4096);
  swept = comm::sweep_ucx_segments(dir, std::chrono::seconds(10));
  REQUIRE(swept.ok());
  CHECK(swept->removed == 2);
  CHECK_FALSE(fs::exists(held));
  CHECK_FALSE(fs::exists(mapped));
  CHECK(fs::exists(young));

  auto missing = comm::sweep_ucx_segments(dir + "/nowhere", std::chrono::seconds(10));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find(dir + "/nowhere") != std::string::npos);
  fs::remove_all(dir);
}
