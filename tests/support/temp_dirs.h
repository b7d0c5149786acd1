// temp_dirs.h — the test programs' scratch directories. Each is made under /tmp with a tag that
// says which test made it (/tmp/sal-<tag>-XXXXXX); a test program removes those it made when every
// test it ran passed, and keeps them when one failed, naming them on stderr — their logs and run
// directories are what one reads next. SAL_KEEP_TEST_DIRS=1 in the environment keeps them all.
// A suite run used to leave about 230 of them (350 MB) behind. The benchmarks (tests/bench) make
// theirs the same way and keep them: the run directories they measured are part of their report.
#pragma once

#include <string>

namespace sal::test {

// A fresh directory "<under>/sal-<tag>-XXXXXX" (/tmp unless said: /dev/shm for a test that must
// not wait on a disk), made now; throws std::runtime_error (with the path and the reason) where it
// cannot be made.
std::string temp_dir(const std::string& tag, const std::string& under = "/tmp");

// Called by a test program's main with what its tests returned (0: every test passed): removes the
// directories this process made, or keeps and names them. Returns `rc`.
int finish_temp_dirs(int rc);

}  // namespace sal::test
