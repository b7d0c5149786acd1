// test_options.cpp — command-line parsing: a list option (PATH=VALUE,...) given twice adds to the
// list instead of replacing it; an option that takes one value keeps the last.
#include <doctest/doctest.h>

#include "cli/options.h"

using namespace sal;
using namespace sal::cli;

TEST_CASE("--set given twice sets both, and a one-value option keeps the last") {
  Command c{"run", "", "", "run", "", {{"--set", "PATH=VALUE,...", ""}, {"--steps", "N", ""}}, 0, 1};
  auto p = parse(c, {"--set", "policies.redundancy=none", "--set=parallel.redundancy=0", "--steps", "3", "--steps", "5"});
  REQUIRE(p.ok());
  CHECK(p->get_or("--set", "") == "policies.redundancy=none,parallel.redundancy=0");
  CHECK(p->get_or("--steps", "") == "5");
}
