// options.h — command-line parsing for the subcommands: each command is declared as data (its
// entry in command_table.cpp), which gives both the parser (unknown options are errors, with a
// suggestion) and the usage text.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace sal::cli {

struct OptSpec {
  std::string name;      // "--steps" or "-e"
  std::string metavar;   // "N" for options taking a value; empty for flags
  std::string help;
};

struct Parsed {
  std::map<std::string, std::string> values;
  std::vector<std::string> flags;
  std::vector<std::string> positional;

  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  Result<int64_t> get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  // A number; without `fallback`, the option is required.
  Result<double> get_double(const std::string& name, std::optional<double> fallback = std::nullopt) const;
};

// One command's definition: everything its parser, its --help, `salamander help` and the
// reference in docs/cli.md say about it (the table of them all: command_table.cpp).
struct Command {
  std::string name;       // "run", "policy check": the words that select it
  std::string operands;   // its positional arguments as `salamander help` lists them: "[JOB.lua]"
  std::string brief;      // one line for `salamander help`
  std::string synopsis;   // "run [JOB.lua] [options]" (alternatives joined by " | ")
  std::string summary;    // a paragraph for its --help
  std::vector<OptSpec> options;
  size_t min_positional = 0;  // fewer is a usage error (exit 2) that shows the usage
  size_t max_positional = 0;  // more is a usage error
  bool hidden = false;        // internal (started by another process): not listed, still answers --help
};

// The options every command accepts (log level/format/file, --help).
const std::vector<OptSpec>& common_options();

Result<Parsed> parse(const Command& cmd, const std::vector<std::string>& args);
std::string usage(const Command& cmd);

}  // namespace sal::cli
