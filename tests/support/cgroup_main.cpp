// cgroup_main.cpp — doctest's main for tests that confine workers to a share of a CPU
// (`--cpu-share`, mesh/cpu_share.h): before any test it opens the cgroup v1 cpu controller as a run
// would; where it is missing or not writable (not root, cgroup v2 only), the program says why and
// exits 77, which CTest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "mesh/cpu_share.h"
#include "support/skip_main.h"
#include "support/temp_dirs.h"

int main(int argc, char** argv) {
  if (!sal::test::listing_only(argc, argv)) {
    auto shares = sal::mesh::CpuShares::open(0.5);
    if (!shares) {
      std::printf("skipped: workers cannot be confined to a CPU share: %s\n", shares.error().message().c_str());
      return sal::test::kSkipped;
    }
  }
  doctest::Context context(argc, argv);
  return sal::test::finish_temp_dirs(context.run());
}
