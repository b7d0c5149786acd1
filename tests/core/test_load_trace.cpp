// test_load_trace.cpp — a directory of load files read as a trace: steps in the order of the numbers
// in their names, and the files of one step that name their ranks (SmartMoE's
// table_iter<N>_rank<R>.log) summed into that step's global counts; duplicate ranks and ranks of
// different shapes refused naming both files; a directory where a file is asked for named as one; the
// real dataset's rank-0 directory where present.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/load_files.h"
#include "core/load_trace.h"

using namespace sal;

namespace {

using Layers = std::vector<std::vector<double>>;

struct Dir {
  std::string path;
  Dir() {
    char tmpl[] = "/tmp/sal-load-trace-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~Dir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path + "/" + name) << text; }
};

std::string trace_file(double a, double b) {  // two layers of three experts, two micro-batches each
  auto row = [](double x) { return "[" + std::to_string(x) + ", 1, 0]"; };
  return "0:[" + row(a) + ", " + row(a) + "]\n1:[" + row(b) + ", " + row(b) + "]\n";
}

}  // namespace

TEST_CASE("load trace: a file's step and rank are read from its name") {
  auto name = [](const std::string& n) {
    auto t = trace_name_of(n);
    return std::pair{t.step, t.rank};
  };
  CHECK(name("table_iter1051_rank0.log") == std::pair<int64_t, int64_t>{1051, 0});
  CHECK(name("table_iter51.log") == std::pair<int64_t, int64_t>{51, -1});
  CHECK(name("rank3_loads_100.csv") == std::pair<int64_t, int64_t>{100, 3});  // a rank first is no step
  CHECK(name("run2_Step-7_RANK_12.csv") == std::pair<int64_t, int64_t>{7, 12});
  CHECK(name("loads.csv") == std::pair<int64_t, int64_t>{-1, -1});
}

TEST_CASE("load trace: every rank's file of an iteration is summed into one step, the steps in order") {
  Dir d;
  for (int rank : {0, 1, 2, 10}) {  // rank 10 sorts after 2, not after 1
    d.write("table_iter11_rank" + std::to_string(rank) + ".log", trace_file(rank + 100, 2 * rank));
    d.write("table_iter1_rank" + std::to_string(rank) + ".log", trace_file(rank, rank));
  }
  d.write("table_iter21_rank0.log", trace_file(5, 5));  // a step missing ranks is still read
  auto steps = read_load_trace(d.path);
  REQUIRE_MESSAGE(steps.ok(), (steps.ok() ? "" : steps.error().message()));
  REQUIRE(steps->size() == 3);
  CHECK((*steps)[0].number == 1);
  CHECK((*steps)[0].ranks == std::vector<int64_t>{0, 1, 2, 10});
  CHECK((*steps)[0].loads == Layers{{2 * 13, 8, 0}, {2 * 13, 8, 0}});  // two micro-batches, four ranks
  CHECK((*steps)[1].number == 11);
  CHECK((*steps)[1].loads == Layers{{2 * 413, 8, 0}, {2 * 26, 8, 0}});
  CHECK((*steps)[2].loads == Layers{{10, 2, 0}, {10, 2, 0}});
  CHECK(describe_trace(*steps) == "9 files: 3 steps of 4 ranks (step 21: 1)");
}

TEST_CASE("load trace: files without ranks are a step each, ordered by their numbers") {
  Dir d;
  for (int step : {100, 20, 3}) d.write("table_iter" + std::to_string(step) + ".log", trace_file(step, 0));
  d.write(".table_iter3.log.swp", "not loads");  // hidden: an editor's, not read
  auto steps = read_load_trace(d.path);
  REQUIRE(steps.ok());
  REQUIRE(steps->size() == 3);
  CHECK((*steps)[0].number == 3);
  CHECK((*steps)[2].loads[0][0] == 200);
  CHECK(describe_trace(*steps) == "3 files, a step each");
  auto one = read_load_trace(d.path + "/table_iter20.log");
  REQUIRE(one.ok());
  CHECK(describe_trace(*one) == "table_iter20.log");
}

TEST_CASE("load trace: a rank twice, ranks of different shapes and an empty directory are refused by name") {
  {
    Dir d;
    d.write("table_iter1_rank0.log", trace_file(1, 1));
    d.write("table_iter1_rank0.log.bak", trace_file(1, 1));
    auto steps = read_load_trace(d.path);
    REQUIRE_FALSE(steps.ok());
    CHECK_MESSAGE(steps.error().message().find("rank 0 of step 1 again") != std::string::npos, steps.error().message());
  }
  {
    Dir d;
    d.write("table_iter1_rank0.log", trace_file(1, 1));
    d.write("table_iter1_rank1.log", "0:[[1, 2, 3, 4]]\n");
    auto steps = read_load_trace(d.path);
    REQUIRE_FALSE(steps.ok());
    const std::string m = steps.error().message();
    CHECK_MESSAGE(m.find("table_iter1_rank1.log has 1 layers of 4 experts, but") != std::string::npos, m);
    CHECK_MESSAGE(m.find("table_iter1_rank0.log (rank 0 of the same step 1) has 2 of 3") != std::string::npos, m);
  }
  {
    Dir d;
    d.write("table_iter1_rank0.log", "0:[[1, -2]]\n");
    auto steps = read_load_trace(d.path);
    REQUIRE_FALSE(steps.ok());
    CHECK_MESSAGE(steps.error().message().find("table_iter1_rank0.log:1: bad count") != std::string::npos,
                  steps.error().message());
  }
  Dir empty;
  auto none = read_load_trace(empty.path);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("no load files in the directory") != std::string::npos);
  auto file = read_load_file(empty.path);  // a directory where one file is asked for says so
  REQUIRE_FALSE(file.ok());
  CHECK(file.error().message() == empty.path + " is a directory, not a file");
}

TEST_CASE("load trace: the SmartMoE dataset's directories, where present") {
  const std::string base = std::string(SAL_SOURCE_DIR) + "/../shared/data/smartmoe-expert-load-trace";
  if (!std::filesystem::exists(base + "/rank0")) {
    MESSAGE("skipped: no ../shared/data/smartmoe-expert-load-trace here");
    return;
  }
  auto rank0 = read_load_trace(base + "/rank0");
  REQUIRE(rank0.ok());
  CHECK(rank0->size() == size_t(std::distance(std::filesystem::directory_iterator(base + "/rank0"), {})));
  CHECK(rank0->front().number == 1);
  CHECK(rank0->front().ranks == std::vector<int64_t>{0});  // one rank's file: a step of one rank
  CHECK(rank0->front().loads.size() == 24);
  if (std::filesystem::exists(base + "/allranks")) {
    auto all = read_load_trace(base + "/allranks");
    REQUIRE(all.ok());
    for (const auto& s : *all) {
      CAPTURE(s.number);
      CHECK(s.ranks.size() > 1);
      double sum = 0;
      for (double c : s.loads[0]) sum += c;
      CHECK(sum == doctest::Approx(4096.0 * 4 * double(s.ranks.size())));  // 4 micro-batches of 4096 a rank
    }
  }
}
