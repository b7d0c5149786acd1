// trace_main.cpp — doctest's main for tests that read a recorded trace from ../shared/data (GPL
// test input, never copied into the tree): where the trace is absent the program says so and exits
// 77, which CTest reports as skipped. Listing the cases works either way.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "support/skip_main.h"
#include "support/temp_dirs.h"
#include "support/trace_plans.h"

using sal::test::kSkipped;
using sal::test::listing_only;

int main(int argc, char** argv) {
  if (!listing_only(argc, argv) && sal::test::trace_files(sal::test::smartmoe_rank0_dir()).empty()) {
    std::printf("skipped: no SmartMoE trace in %s\n", sal::test::smartmoe_rank0_dir().c_str());
    return kSkipped;
  }
  doctest::Context context(argc, argv);
  return sal::test::finish_temp_dirs(context.run());
}
