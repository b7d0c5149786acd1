// t0310_cli_help.cpp — the command line as a new user meets it: `salamander help` lists every
// command, and every command and subcommand answers `--help` with its usage and exit code 0 (a
// usage error — a missing argument — is exit 2).
#include <doctest/doctest.h>

#include <set>
#include <sstream>

#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

std::pair<int, std::string> salamander(const std::vector<std::string>& args, const std::string& dir, int n) {
  std::vector<std::string> argv{bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  Proc p = spawn(argv, dir + "/out" + std::to_string(n));
  const int rc = p.wait(20000);
  return {rc, p.output()};
}

}  // namespace

TEST_CASE("t0310-cli-help: every command listed, and every command's --help exits 0 with its usage") {
  const std::string dir = temp_dir("help");
  int n = 0;
  auto [rc, help] = salamander({"help"}, dir, n++);
  REQUIRE(rc == 0);
  // the commands `salamander help` lists: the first word of each indented line
  std::set<std::string> listed;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') listed.insert(line.substr(2, line.find(' ', 2) - 2));
  for (const char* c : {"run", "controller", "agent", "repl", "job", "policy", "sample", "export", "report", "sim",
                        "keygen", "version"}) {
    CAPTURE(c);
    CHECK(listed.count(c) == 1);
  }
  CHECK(help.find("sim SCENARIO.lua") != std::string::npos);
  CHECK(help.find("sim fit RUN_DIR") != std::string::npos);
  CHECK(help.find("--fields") != std::string::npos);

  const std::vector<std::vector<std::string>> commands = {
      {"run"}, {"controller"}, {"agent"}, {"repl"}, {"job"}, {"sample"}, {"export"}, {"report"}, {"keygen"}, {"sim"},
      {"sim", "fit"}, {"sim", "ettr"}, {"sim", "spare"}, {"policy", "check"}, {"policy", "plan"},
      {"policy", "recovery"}, {"policy", "spare"}, {"policy", "window"}};
  for (auto cmd : commands) {
    std::string name;
    for (const auto& w : cmd) name += (name.empty() ? "" : " ") + w;
    CAPTURE(name);
    cmd.push_back("--help");
    auto [hrc, out] = salamander(cmd, dir, n++);
    CHECK(hrc == 0);
    CHECK(out.find("usage: salamander " + name) != std::string::npos);
  }
  // policy recovery's --json is its own, not `policy plan`'s
  auto [prc, recovery] = salamander({"policy", "recovery", "--help"}, dir, n++);
  CHECK(recovery.find("print the probabilities as JSON") != std::string::npos);
  CHECK(recovery.find("print the plan file") == std::string::npos);
  // a missing argument is a usage error
  CHECK(salamander({"job"}, dir, n++).first == 2);
  CHECK(salamander({"keygen"}, dir, n++).first == 2);
  CHECK(salamander({"export", "--checkpoint", dir}, dir, n++).first == 2);  // no --format
}
