// command_line.h — the dispatcher behind `salamander`: finds the command named by the leading
// words of the command line in the command table (the longest match: `sim fit` before `sim`),
// parses its options by its definition, and runs it; and the texts generated from the table —
// `salamander help`, a group's list of subcommands, docs/cli.md.
#pragma once

#include <string>
#include <vector>

#include "cli/commands.h"

namespace sal::cli {

// The process exit code: 0 success, 1 failure, 2 usage error (every usage error goes to stderr).
int run_command_line(const std::vector<std::string>& args);

// `salamander help`: every listed command with its operands and brief, the options every command
// takes, the exit codes.
std::string top_level_help();

// "usage: ..." for the commands under a group word ("policy"), when it is given alone or with --help.
std::string group_usage(const std::string& group);

// docs/cli.md: every listed command's synopsis, summary and options.
std::string markdown_reference();

}  // namespace sal::cli
