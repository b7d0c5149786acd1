// t0310_cli_help.cpp — the command line as a new user meets it, walked from the binary's own list
// (`salamander help --list`, generated from the command table): `salamander help` lists every
// command, every command answers `--help` with its usage and exit 0, every group word lists its
// subcommands, usage errors exit 2, and docs/cli.md is what `salamander help --markdown` prints.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "support/mesh_harness.h"

using namespace sal;
using namespace sal::test;

namespace {

struct HelpCli {
  std::string dir = temp_dir("help");
  int n = 0;

  // exit code, stdout and stderr together
  std::pair<int, std::string> operator()(const std::vector<std::string>& args) {
    std::vector<std::string> argv{bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    Proc p = spawn(argv, dir + "/out" + std::to_string(n++));
    const int rc = p.wait(20000);
    return {rc, p.output()};
  }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::string> words_of(const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(name);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The options a --help lists: the first word of each "  --x" / "  -x" line.
std::set<std::string> options_listed(const std::string& usage) {
  std::set<std::string> out;
  for (const auto& line : lines_of(usage))
    if (line.rfind("  -", 0) == 0) out.insert(words_of(line)[0]);
  return out;
}

}  // namespace

TEST_CASE("t0310-cli-help: every listed command answers --help, `salamander help` lists them all, usage errors exit 2") {
  HelpCli salamander;
  auto [lrc, list] = salamander({"help", "--list"});
  REQUIRE(lrc == 0);
  const auto commands = lines_of(list);
  REQUIRE(commands.size() >= 20);
  // what a user looks for is there
  for (const char* c : {"run", "controller", "agent", "repl", "job check", "job schema", "policy check", "policy plan",
                        "sample", "export", "report", "sim", "sim fit", "keygen", "version", "help"}) {
    CAPTURE(c);
    CHECK(std::count(commands.begin(), commands.end(), c) == 1);
  }
  auto [hrc, help] = salamander({"help"});
  REQUIRE(hrc == 0);
  CHECK(help.find("exit codes: 0 success, 1 failure, 2 usage error") != std::string::npos);
  std::set<std::string> groups;
  for (const auto& name : commands) {
    CAPTURE(name);
    // listed in `salamander help` as an indented row
    CHECK(help.find("\n  " + name + " ") != std::string::npos);
    auto args = words_of(name);
    if (args.size() > 1) groups.insert(args[0]);
    args.push_back("--help");
    auto [rc, usage] = salamander(args);
    CHECK(rc == 0);
    CHECK(usage.rfind("usage: salamander " + name, 0) == 0);
    // every command takes the common options, and says so
    for (const char* common : {"--log-level", "--log-format", "--log-file", "--help"}) CHECK(options_listed(usage).count(common) == 1);
    // `help NAME` prints the same usage
    auto help_args = words_of(name);
    help_args.insert(help_args.begin(), "help");
    CHECK(salamander(help_args).second == usage);
  }
  // a group word alone is a usage error that lists its subcommands; with --help the same list, exit 0
  REQUIRE(groups.count("policy") == 1);
  for (const auto& g : groups) {
    CAPTURE(g);
    auto [grc, gusage] = salamander({g, "--help"});
    for (const auto& name : commands)
      if (name.rfind(g + " ", 0) == 0) CHECK(gusage.find("  " + name) != std::string::npos);
    if (std::count(commands.begin(), commands.end(), g) == 0) {  // policy, job: no command of their own
      CHECK(grc == 0);
      CHECK(salamander({g}).first == 2);
      auto [urc, unknown] = salamander({g, "chek"});
      CHECK(urc == 2);
      CHECK(unknown.find("unknown subcommand 'chek'") != std::string::npos);
    } else {  // sim: a command of its own, whose --help also lists the subcommands
      CHECK(grc == 0);
      CHECK(gusage.find("subcommands") != std::string::npos);
    }
  }
  // usage errors: exit 2 and a message naming the command
  auto [orc, unknown_option] = salamander({"run", "--stpes", "3"});
  CHECK(orc == 2);
  CHECK(unknown_option.find("salamander run: unknown option --stpes (did you mean '--steps'?)") != std::string::npos);
  auto [crc, unknown_command] = salamander({"rnu"});
  CHECK(crc == 2);
  CHECK(unknown_command.find("unknown command 'rnu' (did you mean 'run'?)") != std::string::npos);
  CHECK(salamander({"keygen"}).first == 2);                            // a missing operand
  CHECK(salamander({"job", "check", "a.lua", "b.lua"}).first == 2);    // one operand too many
  CHECK(salamander({"export", "--checkpoint", salamander.dir, "--format", "onnx"}).first == 2);  // no such format
  CHECK(salamander({}).first == 2);
  // policy recovery's --json is its own, not `policy plan`'s
  auto recovery = salamander({"policy", "recovery", "--help"}).second;
  CHECK(recovery.find("print the probabilities as JSON") != std::string::npos);
  CHECK(recovery.find("print the plan file") == std::string::npos);
}

TEST_CASE("t0310-cli-docs: docs/cli.md is the reference the binary generates") {
  HelpCli salamander;
  auto [rc, reference] = salamander({"help", "--markdown"});
  REQUIRE(rc == 0);
  std::ifstream in(std::string(SAL_SOURCE_DIR) + "/docs/cli.md");
  REQUIRE(in.good());
  std::stringstream docs;
  docs << in.rdbuf();
  if (docs.str() != reference)
    FAIL("docs/cli.md differs from `salamander help --markdown`: regenerate it with "
         "build/salamander help --markdown > docs/cli.md");
  // every command's every option is in it
  for (const auto& name : lines_of(salamander({"help", "--list"}).second)) {
    CAPTURE(name);
    CHECK(reference.find("## salamander " + name + "\n") != std::string::npos);
    auto args = words_of(name);
    args.push_back("--help");
    for (const auto& option : options_listed(salamander(args).second)) {
      CAPTURE(option);
      CHECK(reference.find("`" + option) != std::string::npos);
    }
  }
}
