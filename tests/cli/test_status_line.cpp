// test_status_line.cpp — the progress line's nodes part: out of the job's mesh.nodes while no more
// are alive, and said plainly (not "6/4") when nodes joined beyond them.
#include <doctest/doctest.h>

#include "cli/run_summary.h"

using namespace sal;
using namespace sal::cli;

TEST_CASE("the progress line counts nodes out of mesh.nodes, and names mesh.nodes when more joined") {
  CHECK(nodes_alive(4, 4) == "4/4 alive");
  CHECK(nodes_alive(2, 4) == "2/4 alive");
  CHECK(nodes_alive(0, 4) == "0/4 alive");
  CHECK(nodes_alive(6, 4) == "6 alive (mesh.nodes = 4)");
}
