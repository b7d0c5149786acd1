// test_fuzz_corpus.cpp — every fuzz target's corpus as unit tests, in every build (no clang needed):
// the seeds and each input a fuzzer kept (tests/fuzz/corpus/<target>/), crashes included once
// fixed, run through the target functions. A target that crashes here fails the test program.
#include <doctest/doctest.h>

#include <dirent.h>

#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/targets.h"

namespace {

// The target's corpus, and the files of the tree that are seeds for it already (the shipped job
// files and drills, the wire decoder's hand-made corpus); libFuzzer is given the same folders.
std::vector<std::string> corpus_dirs(const std::string& target) {
  std::vector<std::string> dirs = {"tests/fuzz/corpus/" + target};
  if (target == "job") dirs.push_back("scripts/jobs");
  if (target == "drill") dirs.insert(dirs.end(), {"scripts/drills", "tests/drills"});
  if (target == "wire") dirs.push_back("tests/wire/corpus");
  return dirs;
}

std::vector<std::string> corpus_files(const std::string& target) {
  std::vector<std::string> out;
  for (const auto& rel : corpus_dirs(target)) {
    std::string dir = std::string(SAL_SOURCE_DIR) + "/" + rel;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
      closedir(d);
    }
  }
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void run_corpus(const std::string& name) {
  const sal::fuzz::Target* target = nullptr;
  for (const auto& t : sal::fuzz::kTargets)
    if (name == t.name) target = &t;
  REQUIRE(target != nullptr);
  auto files = corpus_files(name);
  CHECK(files.size() >= 3);  // every target has seeds
  for (const auto& f : files) {
    CAPTURE(f);
    std::string bytes = read_all(f);
    CHECK(target->fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
}

}  // namespace

TEST_CASE("every fuzz target has a corpus test") {
  CHECK(std::size(sal::fuzz::kTargets) == 12);
}

// One case per target, so CTest lists them apart.
#define SAL_CORPUS_CASE(name) \
  TEST_CASE("fuzz-corpus-" #name) {  \
    run_corpus(#name);                \
  }

SAL_CORPUS_CASE(wire)
SAL_CORPUS_CASE(store)
SAL_CORPUS_CASE(job)
SAL_CORPUS_CASE(drill)
SAL_CORPUS_CASE(trace)
SAL_CORPUS_CASE(plan)
SAL_CORPUS_CASE(loads)
SAL_CORPUS_CASE(keys)
SAL_CORPUS_CASE(scenario)
SAL_CORPUS_CASE(repl)
SAL_CORPUS_CASE(pattern)
SAL_CORPUS_CASE(proposal)

// The proposal target on random machine programs as well: each byte is an operation of its stack
// machine, so random bytes build every shape — traps, shared and cyclic tables — the reader meets.
TEST_CASE("fuzz-random-proposal: random proposal programs never run a metamethod") {
  std::mt19937_64 rng(34);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> bytes(rng() % 160);
    for (auto& b : bytes) b = uint8_t(rng());
    CHECK(sal::fuzz::proposal(bytes.data(), bytes.size()) == 0);
  }
}
