// netns_main.cpp — doctest's main for tests that need an address beyond loopback: before any test
// (and before any thread exists) the process moves into a network namespace of its own
// (unshare(CLONE_NEWNET)), brings its loopback up and gives it a second address, kNetnsAddress,
// which is not in 127.0.0.0/8 — so the engine treats it as reachable from other hosts and requires
// CURVE on it. Every process the tests start inherits the namespace, so their traffic goes only to
// addresses inside it, and the namespace disappears with the last of them. Where a namespace cannot
// be made (no CAP_SYS_ADMIN, no `ip`), the program says why and exits 77, which CTest reports as
// skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/netns.h"
#include "support/skip_main.h"
#include "support/temp_dirs.h"

using sal::test::kSkipped;
using sal::test::listing_only;

int main(int argc, char** argv) {
  if (!listing_only(argc, argv)) {
    if (unshare(CLONE_NEWNET) != 0) {
      std::printf("skipped: cannot create a network namespace: %s (needs CAP_SYS_ADMIN)\n", std::strerror(errno));
      return kSkipped;
    }
    std::string setup = "ip link set lo up && ip addr add " + std::string(sal::test::kNetnsAddress) + "/32 dev lo";
    if (std::system(setup.c_str()) != 0) {
      std::printf("skipped: cannot set up the namespace's loopback (`%s` failed)\n", setup.c_str());
      return kSkipped;
    }
  }
  doctest::Context context(argc, argv);
  return sal::test::finish_temp_dirs(context.run());
}
