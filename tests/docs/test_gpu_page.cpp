// test_gpu_page.cpp — docs/gpu.md's "Your own GPU machine" (issue 40) tells a user with a GPU box
// what to run, and what it tells them exists: each script and job file its commands name is in the
// repository, the tests it runs by label are labelled so, and the training run it shows uses the GPU.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace {

std::string source(const std::string& rel) {
  std::ifstream f(std::string(SAL_SOURCE_DIR) + "/" + rel);
  REQUIRE_MESSAGE(f.good(), rel);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The section from its heading to the next heading of its level or above.
std::string section(const std::string& page, const std::string& heading) {
  size_t at = page.find(heading);
  REQUIRE_MESSAGE(at != std::string::npos, heading);
  size_t end = page.find("\n## ", at + heading.size());
  size_t sub = page.find("\n### ", at + heading.size());
  return page.substr(at, std::min(end, sub) - at);
}

}  // namespace

TEST_CASE("docs/gpu.md tells the owner of a GPU machine what to run, and every file it names exists") {
  const std::string own = section(source("docs/gpu.md"), "### Your own GPU machine");
  for (const char* step : {"git clone", "scripts/dev.sh test", "build/salamander run", "-L gpu"})
    CHECK_MESSAGE(own.find(step) != std::string::npos, step);
  std::regex path(R"((scripts/[A-Za-z0-9_./-]+\.(?:sh|lua)|scripts/dev\.sh))");
  size_t named = 0;
  for (auto it = std::sregex_iterator(own.begin(), own.end(), path); it != std::sregex_iterator(); ++it, ++named)
    CHECK_MESSAGE(std::filesystem::exists(std::string(SAL_SOURCE_DIR) + "/" + (*it)[1].str()), (*it)[1].str());
  CHECK(named >= 2);
  // the tests it runs by label are labelled so, and the job it trains runs on a GPU
  CHECK(source("tests/CMakeLists.txt").find("LABELS gpu") != std::string::npos);
  CHECK(source("scripts/jobs/gpu_quickstart.lua").find("cuda:") != std::string::npos);
}
