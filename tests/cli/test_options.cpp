// test_options.cpp — command-line parsing: a list option (PATH=VALUE,...) given twice adds to the
// list instead of replacing it; an option that takes one value keeps the last; a list value keeps a
// comma that does not start the next KEY= (mesh.devices=cuda:0,1).
#include <doctest/doctest.h>

#include "cli/common.h"
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

TEST_CASE("a list value keeps its commas: a comma that does not start KEY= continues the value") {
  auto kv = key_values("--set", "mesh.devices=cuda:0,1,train.lr=0.1,policies.placement=mro");
  REQUIRE(kv.ok());
  REQUIRE(kv->size() == 3);
  CHECK((*kv)[0] == std::pair<std::string, std::string>{"mesh.devices", "cuda:0,1"});
  CHECK((*kv)[1] == std::pair<std::string, std::string>{"train.lr", "0.1"});
  CHECK((*kv)[2] == std::pair<std::string, std::string>{"policies.placement", "mro"});
  auto quoted = key_values("--set", "mesh.devices='cuda:0,2,3'");
  REQUIRE(quoted.ok());
  CHECK(quoted->at(0).second == "'cuda:0,2,3'");
  // the first item still needs its key
  auto bare = key_values("--set", "cuda:0,1");
  REQUIRE_FALSE(bare.ok());
  CHECK(bare.error().message() == "--set: expected KEY=VALUE, got 'cuda:0'");
}
